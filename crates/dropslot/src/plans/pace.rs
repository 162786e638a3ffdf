//! The plan solver steps aside while the API is busy (issue 33).
//!
//! On a 2-vCPU machine, any thread that keeps a CPU busy doubles the API's p99, whatever its
//! priority: two spin loops under `SCHED_IDLE` did it as surely as two solvers
//! (docs/performance.md, "The API beside two plans solving: the pacer"). Priority decides who
//! runs first, not what a busy neighbour costs a request that wakes. So the solver also
//! measures: every [`WINDOW`] it compares the CPU the rest of the process used (the requests'
//! handlers, the writer, the dispatcher: everything but the solvers, its own CPU clock and the
//! others' `schedstat` taken out) with the wall time, and while that is more than [`BUSY`] of a
//! CPU it sleeps [`WINDOW`] at a time instead of searching. Two plans solved at once do not make
//! each other step aside.
//!
//! Measured with CPU clocks, not request counts: a client that holds a request open (a slow
//! upload, a long poll) costs no CPU and does not hold planning up. The plan's time limit
//! still counts while it sleeps, so a plan made under a sustained load is the search's start
//! (every shipment placed where it fits, the rules kept) plus what the quiet moments allowed;
//! re-optimising later improves it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the solver looks, and how long it sleeps when it steps aside.
pub const WINDOW: Duration = Duration::from_millis(5);
/// The share of one CPU the rest of the process may use before the solver steps aside.
pub const BUSY: f64 = 0.25;

/// The solver threads running now (their thread ids), and the CPU of those that ended: what
/// is taken out of the process's CPU, beside this thread's own, to leave the rest of it.
static SOLVERS: Mutex<Solvers> = Mutex::new(Solvers { live: Vec::new(), retired_ns: 0 });

struct Solvers {
    live: Vec<i32>,
    retired_ns: u64,
}

fn solvers() -> std::sync::MutexGuard<'static, Solvers> {
    SOLVERS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A solve's budget: the fraction of its time limit spent, after stepping aside for as long
/// as the rest of the process is busy.
pub struct Pacer {
    began: Instant,
    seconds: f64,
    tid: i32,
    window: Window,
    /// Time spent asleep so far (for the metric).
    pub paused: Duration,
}

/// What the last look saw.
struct Window {
    start: Instant,
    process_ns: u64,
    own_ns: u64,
    other_solvers_ns: u64,
    busy: bool,
}

fn cpu_ns(clock: rustix::time::ClockId) -> u64 {
    let t = rustix::time::clock_gettime(clock);
    u64::try_from(t.tv_sec).unwrap_or(0).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec.unsigned_abs())
}

/// The CPU time of this process's thread `tid` (`/proc/self/task/TID/schedstat`, the same
/// clock as the CPU clocks); 0 where it cannot be read (then another solver's work counts as
/// the rest of the process, and the solvers step aside for each other more than they need).
fn thread_ns(tid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

impl Window {
    fn look(start: Instant, tid: i32) -> Window {
        let other_solvers_ns = {
            let s = solvers();
            s.retired_ns + s.live.iter().filter(|t| **t != tid).map(|t| thread_ns(*t)).sum::<u64>()
        };
        Window {
            start,
            process_ns: cpu_ns(rustix::time::ClockId::ProcessCPUTime),
            own_ns: cpu_ns(rustix::time::ClockId::ThreadCPUTime),
            other_solvers_ns,
            busy: false,
        }
    }
}

impl Pacer {
    /// A budget of `seconds` counted from `began` (the request's start), for the calling
    /// thread's solve.
    pub fn new(began: Instant, seconds: f64) -> Pacer {
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        solvers().live.push(tid);
        Pacer { began, seconds, tid, window: Window::look(Instant::now(), tid), paused: Duration::ZERO }
    }

    /// Whether the rest of the process used more than [`BUSY`] of a CPU over the last
    /// window; looked at once a window.
    fn busy(&mut self) -> bool {
        let now = Instant::now();
        let wall = now.duration_since(self.window.start);
        if wall < WINDOW {
            return self.window.busy;
        }
        let mut next = Window::look(now, self.tid);
        let solvers = next.own_ns.saturating_sub(self.window.own_ns)
            + next.other_solvers_ns.saturating_sub(self.window.other_solvers_ns);
        let others = next.process_ns.saturating_sub(self.window.process_ns).saturating_sub(solvers);
        next.busy = others as f64 > BUSY * wall.as_nanos() as f64;
        self.window = next;
        self.window.busy
    }
}

impl Drop for Pacer {
    /// This solver's CPU moves to the ended solvers' sum as it leaves the live ones.
    fn drop(&mut self) {
        let own = cpu_ns(rustix::time::ClockId::ThreadCPUTime);
        let mut s = solvers();
        s.live.retain(|t| *t != self.tid);
        s.retired_ns += own;
    }
}

impl dropslot_core::routing::solver::Budget for Pacer {
    fn spent(&mut self, _iterations: u64) -> f64 {
        loop {
            let spent = self.began.elapsed().as_secs_f64() / self.seconds;
            if spent >= 1.0 || !self.busy() {
                return spent;
            }
            let slept = Instant::now();
            std::thread::sleep(WINDOW);
            self.paused += slept.elapsed();
        }
    }
}
