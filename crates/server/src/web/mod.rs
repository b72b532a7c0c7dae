//! The HTTP port's application: one route table ([`routes`]) sends each
//! request to the native tunnel ([`tunnel`]), the operations endpoints, the
//! JSON API and reverse lookup ([`crate::rest`], `/api/...`, `/hrls/...`), the
//! admin console, or the web handle proxy ([`crate::proxy`], every other path
//! unless `enable_proxy` is off). Connections, TLS and keep-alive are the
//! transport's ([`crate::transport::unify`]), which hands every request here
//! through [`WebHandler`].

mod operations;
pub mod routes;
pub mod tunnel;

use crate::http_body::{BodyBudget, BodyReader};
use crate::metrics::ConnectionGuard;
use crate::rest::Rest;
use crate::transport::http::{Conn, HttpPort, WebHandler};
use crate::web_context::WebContext;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, LOCATION};
use hyper::{Request, Response, StatusCode};
use routes::Route;
use std::sync::Arc;
use std::time::{Duration, Instant};
pub use tunnel::Tunnel;

/// What the HTTP port serves; `T` takes the tunnelled native messages.
pub struct Web<T> {
    ctx: Arc<WebContext>,
    rest: Rest,
    native: T,
    /// Request bodies (tunnel, JSON API): time limit and shared budget.
    bodies: BodyReader,
    /// The connection's idle limit, which the proxy's pages advertise.
    keep_alive: Duration,
}

/// The HTTP port: its settings from `ctx`, request bodies charged to `budget`
/// (the listener's), tunnelled messages to `native`.
pub fn port<T: Tunnel>(ctx: Arc<WebContext>, budget: Arc<BodyBudget>, native: T) -> HttpPort<Web<T>> {
    let keep_alive = Duration::from_secs(ctx.transport.http_keep_alive_secs.max(1));
    let tls = ctx.tls.as_ref().map(|slot| slot.acceptor(ctx.transport.https_client_certificates));
    let bodies = BodyReader::new(keep_alive, budget);
    HttpPort {
        max_requests: ctx.transport.http_max_requests,
        handler: Web { rest: Rest::new(ctx.clone(), bodies.clone()), ctx, native, bodies, keep_alive },
        tls,
        keep_alive,
    }
}

impl<T: Tunnel> WebHandler for Web<T> {
    type Open = ConnectionGuard;

    fn respond(
        &self,
        conn: Conn,
        req: Request<Incoming>,
    ) -> impl std::future::Future<Output = Response<Full<Bytes>>> + Send {
        self.route(conn, req)
    }

    fn wants_access_line(&self) -> bool {
        self.ctx.logs.wants_access_line()
    }

    fn opened(&self) -> ConnectionGuard {
        self.ctx.metrics.connection("http")
    }
}

impl<T: Tunnel> Web<T> {
    /// Answer one request: routed once, by [`routes::route`].
    pub async fn route(&self, conn: Conn, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let ctx = &*self.ctx;
        let enable_proxy = ctx.transport.enable_proxy;
        let route = routes::route(req.method(), req.uri().path(), req.headers(), enable_proxy);
        let Some(service) = route.service(enable_proxy) else {
            // Every service's future is boxed: held inline, the largest of them sets
            // the size of each request's future, which hyper moves (memcpy) twice per
            // request: 24% of a JSON GET's user-space instructions (callgrind).
            return match route {
                // Admission happens per native message, like on the other transports.
                Route::Tunnel => Box::pin(tunnel::tunnel(&self.native, req, &self.bodies, conn.peer)).await,
                Route::Ready => Box::pin(operations::readiness(ctx)).await,
                Route::Metrics => operations::metrics(ctx).await,
                _ => operations::health(),
            };
        };
        // Operations endpoints answer even when the server is saturated; the rest waits its turn.
        let started = Instant::now();
        let _permit = match ctx.admission.admit().await {
            Ok(p) => p,
            Err(why) => {
                let mut r =
                    json_error(StatusCode::SERVICE_UNAVAILABLE, 3, &format!("Server too busy ({})", why.as_str()));
                r.headers_mut().insert("retry-after", HeaderValue::from(ctx.admission.retry_after_secs()));
                ctx.metrics.observe_http(service, 503, started.elapsed());
                return r;
            }
        };
        let response = match route {
            Route::Api(api) => Box::pin(self.rest.handle(conn, req, api)).await,
            Route::Console => crate::console::serve(&req, conn.secure, ctx.live().allow_plain_http_admin),
            Route::Proxy(page) => Box::pin(crate::proxy::serve(ctx, conn, req, page, self.keep_alive)).await,
            // Like Handle.Net without its HTML proxy: /PREFIX/SUFFIX → the JSON API.
            Route::ToApi => redirect(&format!("/api/handles{}", req.uri().path())),
            _ => {
                let message = format!("Unknown HTTP API endpoint {} {}", req.method(), req.uri().path());
                json_error(StatusCode::NOT_FOUND, 4, &message)
            }
        };
        ctx.metrics.observe_http(service, response.status().as_u16(), started.elapsed());
        response
    }
}

fn redirect(location: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::FOUND;
    if let Ok(v) = HeaderValue::from_str(location) {
        response.headers_mut().insert(LOCATION, v);
    }
    response
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// The JSON error shape of the Handle.Net HTTP API (§4.5).
pub fn json_error(status: StatusCode, response_code: u32, message: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({ "responseCode": response_code, "message": message });
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
