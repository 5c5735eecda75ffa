//! A TCP relay in front of a real service, which a test can cut: the service then looks down to
//! whoever connects through the relay (a master's Redis, say), while other tests sharing the
//! service are untouched.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// Forwards every connection made to [`Relay::addr`] to the target, until [`Relay::cut`].
pub struct Relay {
    pub addr: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// Starts relaying from a new port on 127.0.0.1 to `target` (`host:port`).
    pub async fn start(target: &str) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port for the relay");
        let addr = listener.local_addr().expect("the relay's address");
        let target = target.to_owned();
        let accepting = tokio::spawn(async move {
            // Owned here: aborting this task drops the set, which aborts every connection.
            let mut connections = JoinSet::new();
            while let Ok((mut client, _)) = listener.accept().await {
                let target = target.clone();
                connections.spawn(async move {
                    if let Ok(mut service) = TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut service).await;
                    }
                });
            }
        });
        Relay { addr, accepting }
    }

    /// Closes the port and every open connection: the service is gone for the relay's clients.
    pub async fn cut(self) {
        self.accepting.abort();
        let _ = self.accepting.await;
    }
}
