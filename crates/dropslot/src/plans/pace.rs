//! The plan solver steps aside while the API is busy (issue 33, third session).
//!
//! On a 2-vCPU machine, any thread that keeps a CPU busy doubles the API's p99, whatever its
//! priority: two spin loops under `SCHED_IDLE` did it as surely as two solvers
//! (docs/performance.md, "Issue 33, third session"). Priority decides who runs first, not what
//! a busy neighbour costs a request that wakes. So the solver also measures: every [`WINDOW`]
//! it compares the CPU the rest of the process used (the requests' handlers, the writer, the
//! dispatcher: everything but the solvers) with the wall time, and while that is more than
//! [`BUSY`] of a CPU it sleeps [`WINDOW`] at a time instead of searching.
//!
//! Measured with CPU clocks, not request counts: a client that holds a request open (a slow
//! upload, a long poll) costs no CPU and does not hold planning up. The plan's time limit
//! still counts while it sleeps, so a plan made under a sustained load is the search's start
//! (every shipment placed where it fits, the rules kept) plus what the quiet moments allowed;
//! re-optimising later improves it.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// How often the solver looks, and how long it sleeps when it steps aside.
pub const WINDOW: Duration = Duration::from_millis(5);
/// The share of one CPU the rest of the process may use before the solver steps aside.
pub const BUSY: f64 = 0.25;

/// CPU nanoseconds every solver thread has used, summed as each one measures itself: what is
/// taken out of the process's CPU to leave the rest of it.
static SOLVERS_CPU_NS: AtomicU64 = AtomicU64::new(0);

/// A solve's budget: the fraction of its time limit spent, after stepping aside for as long
/// as the rest of the process is busy.
pub struct Pacer {
    began: Instant,
    seconds: f64,
    window: Window,
    /// Time spent asleep so far (for the metric).
    pub paused: Duration,
}

struct Window {
    start: Instant,
    process_ns: u64,
    solvers_ns: u64,
    thread_ns: u64,
    busy: bool,
}

impl Window {
    fn open(start: Instant, busy: bool) -> Window {
        let thread_ns = cpu_ns(rustix::time::ClockId::ThreadCPUTime);
        Window {
            start,
            process_ns: cpu_ns(rustix::time::ClockId::ProcessCPUTime),
            solvers_ns: SOLVERS_CPU_NS.load(Relaxed),
            thread_ns,
            busy,
        }
    }
}

fn cpu_ns(clock: rustix::time::ClockId) -> u64 {
    let t = rustix::time::clock_gettime(clock);
    u64::try_from(t.tv_sec).unwrap_or(0).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec.unsigned_abs())
}

impl Pacer {
    /// A budget of `seconds` counted from `began` (the request's start).
    pub fn new(began: Instant, seconds: f64) -> Pacer {
        Pacer { began, seconds, window: Window::open(Instant::now(), false), paused: Duration::ZERO }
    }

    /// Whether the rest of the process used more than [`BUSY`] of a CPU over the last
    /// window; looked at once a window.
    fn busy(&mut self) -> bool {
        let now = Instant::now();
        let wall = now.duration_since(self.window.start);
        if wall < WINDOW {
            return self.window.busy;
        }
        // This thread's own CPU since the last look goes to the solvers' sum first.
        let thread_ns = cpu_ns(rustix::time::ClockId::ThreadCPUTime);
        SOLVERS_CPU_NS.fetch_add(thread_ns.saturating_sub(self.window.thread_ns), Relaxed);
        let process_ns = cpu_ns(rustix::time::ClockId::ProcessCPUTime);
        let solvers_ns = SOLVERS_CPU_NS.load(Relaxed);
        let others = process_ns
            .saturating_sub(self.window.process_ns)
            .saturating_sub(solvers_ns.saturating_sub(self.window.solvers_ns));
        let busy = others as f64 > BUSY * wall.as_nanos() as f64;
        self.window = Window { start: now, process_ns, solvers_ns, thread_ns, busy };
        busy
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
