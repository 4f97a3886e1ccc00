//! TCP rendezvous: rank 0 hands NCCL's 128-byte unique id to ranks 1..W-1 (`--master ADDR:PORT`).
//!
//! Rank 0 listens; every other rank connects (retrying until the deadline, since rank 0 may start
//! later), says who it is, and waits. Once all W-1 ranks have checked in, rank 0 sends each the
//! id: so the reply is also a barrier, and a duplicate rank or a different world size is caught
//! here, with a message on both sides, rather than as an NCCL hang.
//!
//! Wire format (big-endian): hello = magic "TCGNNRDV", version u32, rank u32, world u32;
//! reply = magic, status u8 (0 = ok, 1 = refused), then either the 128-byte id or a u32 length and
//! the reason.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// NCCL's unique id (`ncclUniqueId`): 128 opaque bytes.
pub type UniqueId = [u8; 128];

const MAGIC: &[u8; 8] = b"TCGNNRDV";
const VERSION: u32 = 1;
const CTX: &str = "rendezvous";

/// Rank 0: bind `addr` and [`serve`].
pub fn serve_at(addr: &str, world: usize, id: &UniqueId, timeout: Duration) -> Result<()> {
    let listener = TcpListener::bind(resolve(addr)?).map_err(|e| Error::comm(CTX, format!("rank 0 cannot listen on {addr}: {e}")))?;
    serve(listener, world, id, timeout)
}

/// Rank 0: wait (at most `timeout` in all) for ranks 1..world to check in, then send each `id`.
pub fn serve(listener: TcpListener, world: usize, id: &UniqueId, timeout: Duration) -> Result<()> {
    check_world(0, world)?;
    let deadline = Instant::now() + timeout;
    let local = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    listener.set_nonblocking(true).map_err(|e| Error::comm(CTX, e))?;
    let mut joined: Vec<Option<TcpStream>> = (0..world).map(|_| None).collect();
    let mut waiting = world - 1;
    while waiting > 0 {
        let (mut s, peer) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let missing: Vec<usize> = (1..world).filter(|&r| joined[r].is_none()).collect();
                    return Err(Error::comm(CTX, format!("rank 0 on {local}: ranks {missing:?} did not connect within {timeout:?}")));
                }
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            Err(e) => return Err(Error::comm(CTX, format!("rank 0 on {local}: accept failed: {e}"))),
        };
        s.set_nonblocking(false).map_err(|e| Error::comm(CTX, e))?;
        set_timeouts(&s, remaining(deadline))?;
        let rank = match read_hello(&mut s, world) {
            Ok(r) if joined[r].is_some() => Err(format!("rank {r} connected twice (second from {peer})")),
            other => other,
        };
        match rank {
            Ok(r) => {
                joined[r] = Some(s);
                waiting -= 1;
            }
            Err(why) => {
                // Tell the peer why, then fail: a mis-launched job must stop, not limp on.
                let _ = refuse(&mut s, &why);
                return Err(Error::comm(CTX, format!("rank 0 on {local}: {why}")));
            }
        }
    }
    for (r, s) in joined.iter_mut().enumerate().skip(1) {
        let s = s.as_mut().expect("every rank joined");
        let mut msg = Vec::with_capacity(8 + 1 + 128);
        msg.extend_from_slice(MAGIC);
        msg.push(0);
        msg.extend_from_slice(id);
        s.write_all(&msg).map_err(|e| Error::comm(CTX, format!("rank 0: sending the id to rank {r}: {e}")))?;
    }
    Ok(())
}

/// Ranks 1..world: connect to rank 0 at `addr` (retrying until `timeout`), check in, receive the id.
pub fn join(addr: &str, rank: usize, world: usize, timeout: Duration) -> Result<UniqueId> {
    check_world(rank, world)?;
    if rank == 0 {
        return Err(Error::comm(CTX, "rank 0 serves the id; it does not join"));
    }
    let target = resolve(addr)?;
    let deadline = Instant::now() + timeout;
    let mut s = loop {
        match TcpStream::connect_timeout(&target, remaining(deadline).max(Duration::from_millis(1))) {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline => {
                let _ = e; // rank 0 not listening yet: try again
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(Error::comm(CTX, format!("rank {rank}: no rank 0 at {addr} within {timeout:?}: {e}"))),
        }
    };
    set_timeouts(&s, remaining(deadline))?;
    let io = |e: std::io::Error| Error::comm(CTX, format!("rank {rank} talking to rank 0 at {addr}: {e}"));
    let mut hello = Vec::with_capacity(20);
    hello.extend_from_slice(MAGIC);
    for v in [VERSION, rank as u32, world as u32] {
        hello.extend_from_slice(&v.to_be_bytes());
    }
    s.write_all(&hello).map_err(io)?;
    let mut head = [0u8; 9];
    s.read_exact(&mut head).map_err(io)?;
    if &head[..8] != MAGIC {
        return Err(Error::comm(CTX, format!("rank {rank}: {addr} is not a tcgnn rendezvous")));
    }
    if head[8] != 0 {
        let mut len = [0u8; 4];
        s.read_exact(&mut len).map_err(io)?;
        let mut why = vec![0u8; (u32::from_be_bytes(len) as usize).min(4096)];
        s.read_exact(&mut why).map_err(io)?;
        return Err(Error::comm(CTX, format!("rank {rank}: rank 0 refused: {}", String::from_utf8_lossy(&why))));
    }
    let mut id = [0u8; 128];
    s.read_exact(&mut id).map_err(io)?;
    Ok(id)
}

fn read_hello(s: &mut TcpStream, world: usize) -> std::result::Result<usize, String> {
    let mut b = [0u8; 20];
    s.read_exact(&mut b).map_err(|e| format!("reading a hello: {e}"))?;
    if &b[..8] != MAGIC {
        return Err("a connection that is not a tcgnn rank".into());
    }
    let word = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let (version, rank, their_world) = (word(8), word(12) as usize, word(16) as usize);
    if version != VERSION {
        return Err(format!("rank {rank} speaks rendezvous version {version}, rank 0 speaks {VERSION}"));
    }
    if their_world != world {
        return Err(format!("rank {rank} was started with world size {their_world}, rank 0 with {world}"));
    }
    if rank == 0 || rank >= world {
        return Err(format!("rank {rank} is outside 1..{world}"));
    }
    Ok(rank)
}

fn refuse(s: &mut TcpStream, why: &str) -> std::io::Result<()> {
    let mut msg = Vec::new();
    msg.extend_from_slice(MAGIC);
    msg.push(1);
    msg.extend_from_slice(&(why.len() as u32).to_be_bytes());
    msg.extend_from_slice(why.as_bytes());
    s.write_all(&msg)
}

fn check_world(rank: usize, world: usize) -> Result<()> {
    if world == 0 || rank >= world || world > u32::MAX as usize {
        return Err(Error::comm(CTX, format!("rank {rank} of a world of {world}")));
    }
    Ok(())
}

fn resolve(addr: &str) -> Result<SocketAddr> {
    addr.to_socket_addrs()
        .map_err(|e| Error::comm(CTX, format!("master address '{addr}' (expected HOST:PORT): {e}")))?
        .next()
        .ok_or_else(|| Error::comm(CTX, format!("master address '{addr}' resolves to nothing")))
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

fn set_timeouts(s: &TcpStream, t: Duration) -> Result<()> {
    // A zero timeout means "none" to std: keep at least a millisecond.
    let t = Some(t.max(Duration::from_millis(1)));
    s.set_read_timeout(t).and_then(|_| s.set_write_timeout(t)).map_err(|e| Error::comm(CTX, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener() -> (TcpListener, String) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        (l, addr)
    }

    #[test]
    fn three_ranks_get_the_id() {
        let (l, addr) = listener();
        let id: UniqueId = std::array::from_fn(|i| (i * 7 + 3) as u8);
        let got = std::thread::scope(|s| {
            let master = s.spawn(|| serve(l, 3, &id, Duration::from_secs(20)));
            let joins: Vec<_> = [2usize, 1]
                .iter()
                .map(|&r| {
                    let addr = addr.clone();
                    s.spawn(move || join(&addr, r, 3, Duration::from_secs(20)))
                })
                .collect();
            master.join().unwrap().unwrap();
            joins.into_iter().map(|h| h.join().unwrap().unwrap()).collect::<Vec<_>>()
        });
        assert!(got.iter().all(|g| g == &id));
    }

    #[test]
    fn wrong_world_is_refused_on_both_sides() {
        let (l, addr) = listener();
        let id = [9u8; 128];
        let (m, j) = std::thread::scope(|s| {
            let master = s.spawn(|| serve(l, 3, &id, Duration::from_secs(20)));
            let j = join(&addr, 1, 4, Duration::from_secs(20));
            (master.join().unwrap(), j)
        });
        assert!(m.unwrap_err().to_string().contains("world size 4"));
        assert!(j.unwrap_err().to_string().contains("refused"));
    }

    #[test]
    fn timeouts_and_bad_input() {
        let (l, addr) = listener();
        let e = serve(l, 2, &[0; 128], Duration::from_millis(100)).unwrap_err();
        assert!(e.to_string().contains("[1] did not connect"), "{e}");
        // Nothing listens there any more: the joiner gives up at its deadline.
        let e = join(&addr, 1, 2, Duration::from_millis(200)).unwrap_err();
        assert!(e.to_string().contains("no rank 0"), "{e}");
        assert!(join("not-an-address", 1, 2, Duration::from_millis(10)).is_err());
        assert!(join(&addr, 2, 2, Duration::from_millis(10)).is_err());
        // A world of one needs nobody.
        serve(TcpListener::bind("127.0.0.1:0").unwrap(), 1, &[0; 128], Duration::from_millis(10)).unwrap();
    }
}
