//! The HTTP edge: the routes and their handlers, the middleware around them (CORS, limits,
//! timeouts, the access log, metrics), and the accept loop. Every call that reached the parser
//! is answered with HTTP 200 and its APIJSON code in the body; refusals before it keep their
//! HTTP status and get an envelope too.

pub mod accept;
mod accounts;
mod calls;
mod compress;
mod cors;
mod drain;
mod layers;
mod middleware;
mod ops;
mod proxy_protocol;
mod reply;
mod routes;
mod sent;
mod serve;
mod subscribe;

pub use serve::serve;

#[cfg(test)]
mod tests;
