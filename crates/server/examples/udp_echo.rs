//! Reference for UDP benchmarks: echoes every datagram back with the server's
//! own batched socket code and threads, doing no protocol work at all. Its
//! requests per core-second bound what `handled` can reach on the same box.
//!
//! cargo run --release -p handled-server --example udp_echo -- 127.0.0.1:12700 [sockets]

use handled_server::transport::udp::{bind, send_batch, BatchReceiver};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:12700".into()).parse().expect("address like 127.0.0.1:12700");
    let count: usize = args.next().map(|n| n.parse().expect("socket count")).unwrap_or(2);
    let threads: Vec<_> = bind(addr, count)?
        .into_iter()
        .map(|socket| {
            std::thread::spawn(move || {
                let mut receiver = BatchReceiver::new(&socket);
                loop {
                    if let Ok(batch) = receiver.receive() {
                        let replies: Vec<_> = batch.into_iter().map(|d| (d.peer, d.bytes)).collect();
                        send_batch(&socket, &replies);
                    }
                }
            })
        })
        .collect();
    println!("ready");
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}
