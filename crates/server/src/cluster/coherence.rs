//! The record cache made coherent across the nodes sharing a store
//! (docs/cluster.md, "A record cache coherent across nodes"): this node serves
//! from its cache only under a live lease, and every write is announced to
//! every member with a live lease before it is answered; a member that does
//! not acknowledge is fenced and its lease waited out.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use handled_store::{DocumentStore, StoreError};
use parking_lot::Mutex;

use super::channel::{self, ChannelStats, Kind, Peers};
use super::lease::{Leases, Member, Renewal};
use crate::cache::{Change, Coherence, CoherenceStats, RecordCache};
use handled_store::clock::now_ms;

/// Timings (config keys `cluster_*`).
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    pub lease: Duration,
    /// Clock skew allowed between nodes: a node stops serving this long before
    /// its lease ends, a writer waits this long after it.
    pub margin: Duration,
    /// Oldest view of the members a writer broadcasts to.
    pub view_refresh: Duration,
    /// Longest wait for a peer's acknowledgement before it is fenced.
    pub ack_timeout: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            lease: Duration::from_millis(2000),
            margin: Duration::from_millis(250),
            view_refresh: Duration::from_millis(500),
            ack_timeout: Duration::from_millis(200),
        }
    }
}

pub struct Cluster {
    leases: Leases,
    peers: Peers,
    timings: Timings,
    cache: Weak<RecordCache>,
    /// Serve from the cache only in `[serve_from, serve_until − margin)` (wall ms).
    serve_from: AtomicU64,
    serve_until: AtomicU64,
    view: Mutex<(Option<Instant>, Arc<Vec<Member>>)>,
    sent: AtomicU64,
    fences: AtomicU64,
    channel: Arc<ChannelStats>,
    /// The listener and the lease keeper, stopped by [`Cluster::leave`].
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

impl Cluster {
    /// Join: listen on `listen` for peers' invalidations of `cache`, and keep
    /// a lease in `store` (the store under the cache). Runs until the returned
    /// tasks are dropped with the runtime.
    pub async fn start(
        store: Arc<dyn DocumentStore>,
        cache: &Arc<RecordCache>,
        listen: SocketAddr,
        site_secret: &[u8],
        timings: Timings,
    ) -> std::io::Result<Arc<Cluster>> {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let key = channel::channel_key(site_secret);
        let channel = Arc::new(ChannelStats::default());
        let cluster = Arc::new(Cluster {
            leases: Leases::new(store, addr, ms(timings.lease)),
            peers: Peers::new(key),
            timings,
            cache: Arc::downgrade(cache),
            serve_from: AtomicU64::new(u64::MAX),
            serve_until: AtomicU64::new(0),
            view: Mutex::new((None, Arc::new(Vec::new()))),
            sent: AtomicU64::new(0),
            fences: AtomicU64::new(0),
            channel: channel.clone(),
            tasks: Mutex::new(Vec::new()),
        });
        cache.set_coherence(cluster.clone());
        let serving = tokio::spawn(channel::serve(listener, key, cache.clone(), channel));
        cluster.renew_once().await;
        let renewing = tokio::spawn(cluster.clone().keep_lease());
        *cluster.tasks.lock() = vec![serving.abort_handle(), renewing.abort_handle()];
        Ok(cluster)
    }

    /// Stop answering peers and renewing (as if the node died): peers fence
    /// it at their next write and wait out its lease.
    pub fn stop(&self) {
        for t in self.tasks.lock().drain(..) {
            t.abort();
        }
        self.serve_until.store(0, Ordering::Release);
        self.drop_cache();
    }

    #[cfg(test)]
    pub async fn fence_for_test(&self, id: u64) {
        self.leases.fence(id).await.unwrap();
    }

    /// This node's id in the lease table.
    pub fn id(&self) -> u64 {
        self.leases.id()
    }

    async fn keep_lease(self: Arc<Self>) {
        let mut every = tokio::time::interval(self.timings.lease / 4);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            self.renew_once().await;
            if let Err(e) = self.refresh_view().await {
                tracing::warn!("cluster members not re-read: {e}");
            }
        }
    }

    /// One renewal; on failure the cache is dropped and not served until a
    /// renewal holds again and every writer's view includes us.
    pub async fn renew_once(&self) {
        match self.leases.renew().await {
            Renewal::Held { lease_until, fresh } => {
                // A lapsed lease (renewed too late) is like a new one: writers
                // may have left us out meanwhile.
                let lapsed = now_ms() + ms(self.timings.margin) >= self.serve_until.load(Ordering::Acquire);
                if fresh || lapsed {
                    self.drop_cache();
                    let from = now_ms() + ms(self.timings.view_refresh + self.timings.margin);
                    self.serve_from.store(from, Ordering::Release);
                    tracing::info!(node = format_args!("{:016x}", self.leases.id()), "cluster lease taken");
                }
                self.serve_until.store(lease_until, Ordering::Release);
            }
            Renewal::Failed(e) => {
                if self.serve_until.swap(0, Ordering::AcqRel) != 0 {
                    tracing::warn!("cluster lease not renewed ({e}): the record cache is dropped and read through");
                }
                self.drop_cache();
            }
        }
    }

    fn drop_cache(&self) {
        if let Some(cache) = self.cache.upgrade() {
            cache.invalidate(&Change::All);
        }
    }

    async fn refresh_view(&self) -> Result<Arc<Vec<Member>>, StoreError> {
        let members = Arc::new(self.leases.members().await?);
        self.peers.retain(&members.iter().map(|m| m.addr).collect::<Vec<_>>());
        *self.view.lock() = (Some(Instant::now()), members.clone());
        Ok(members)
    }

    /// The other members that may be serving from their caches, from a view
    /// no older than `view_refresh`.
    async fn live_peers(&self) -> Result<Vec<Member>, StoreError> {
        let (at, members) = self.view.lock().clone();
        let members = match at {
            Some(at) if at.elapsed() < self.timings.view_refresh => members,
            _ => self.refresh_view().await?,
        };
        let now = now_ms();
        Ok(members.iter().filter(|m| m.id != self.leases.id() && m.lease_until > now).cloned().collect())
    }
}

#[async_trait]
impl Coherence for Cluster {
    fn may_serve(&self) -> bool {
        let now = now_ms();
        self.serve_from.load(Ordering::Acquire) <= now
            && now + ms(self.timings.margin) < self.serve_until.load(Ordering::Acquire)
    }

    async fn publish(&self, change: &Change) -> Result<(), StoreError> {
        self.broadcast(Kind::Invalidate, &channel::encode_change(change)).await
    }

    async fn mark_pending(&self, pending: &Change) -> Result<(), StoreError> {
        self.broadcast(Kind::MarkPending, &channel::encode_change(pending)).await
    }

    async fn settle(&self, pending: &Change, change: &Change) -> Result<(), StoreError> {
        self.broadcast(Kind::Settle, &channel::encode_settle(pending, change)).await
    }

    async fn leave(&self) {
        self.stop();
        if let Err(e) = self.leases.remove().await {
            tracing::warn!("cluster lease not removed ({e}): the next write elsewhere waits for it to end");
        }
    }

    fn stats(&self) -> CoherenceStats {
        CoherenceStats {
            invalidations_sent: self.sent.load(Ordering::Relaxed),
            invalidations_received: self.channel.received.load(Ordering::Relaxed),
            refused_frames: self.channel.refused_frames.load(Ordering::Relaxed),
            fences: self.fences.load(Ordering::Relaxed),
            lease_live: self.may_serve(),
        }
    }
}

impl Cluster {
    /// Send a message to every member with a live lease and wait for its ack;
    /// a member that does not acknowledge is fenced and its lease waited out.
    async fn broadcast(&self, kind: Kind, payload: &[u8]) -> Result<(), StoreError> {
        let peers = self.live_peers().await?;
        if peers.is_empty() {
            return Ok(());
        }
        let acks = futures_util::future::join_all(
            peers.iter().map(|m| self.peers.send(m.addr, kind, payload, self.timings.ack_timeout)),
        )
        .await;
        self.sent.fetch_add(peers.len() as u64, Ordering::Relaxed);
        for (m, acked) in peers.iter().zip(acks) {
            if acked {
                continue;
            }
            // Stop it renewing, then wait until it has stopped serving (no
            // row: it left cleanly, having stopped serving first).
            let until = self.leases.fence(m.id).await.map_err(|e| {
                StoreError::Backend(format!(
                    "cluster node {} missed a cache message and could not be fenced: {e}",
                    m.addr
                ))
            })?;
            if let Some(until) = until {
                self.fences.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(node = format_args!("{:016x}", m.id), addr = %m.addr, "cluster node did not acknowledge a cache message: fenced");
                let wait = (until + ms(self.timings.margin)).saturating_sub(now_ms());
                tokio::time::sleep(Duration::from_millis(wait)).await;
            }
        }
        Ok(())
    }
}
