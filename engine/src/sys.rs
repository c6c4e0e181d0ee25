//! The few Linux calls the event loop needs: the monotonic clock, an absolute timerfd,
//! epoll and the process's CPU time. Kept here so the rest of the engine holds no `unsafe`.

use std::io;
use std::os::unix::io::RawFd;

/// CLOCK_MONOTONIC in nanoseconds: every intended, send and reply time is on this clock.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The process's user and system CPU seconds so far (getrusage), so the report can say how
/// busy the engine itself was over the measured window.
pub fn cpu_seconds() -> (f64, f64) {
    // SAFETY: rusage is plain data and getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

/// Timer slack of 1 ns: by default Linux may fire a sleeping thread's timer up to 50 µs
/// late to batch wake-ups, which would show as schedule lag at every rate.
pub fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Ask the scheduler for a short slice (0.1 ms, its minimum) for this thread. Since Linux
/// 6.12 a waking task with a shorter slice than the running one preempts it at once
/// (PREEMPT_SHORT); with the default slice, any other process running on the client CPU
/// (even at nice 19) may finish its slice first, and the engine wakes up to 3 ms late.
/// Unprivileged; older kernels ignore the field, so a failure changes nothing.
pub fn short_sched_slice() {
    let attr = libc::sched_attr {
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_flags: 0,
        sched_nice: 0,
        sched_priority: 0,
        sched_runtime: 100_000,
        sched_deadline: 0,
        sched_period: 0,
    };
    // SAFETY: attr is a valid sched_attr of the size it states; 0 is this thread.
    unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            0,
            &attr as *const libc::sched_attr,
            0,
        )
    };
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A timerfd armed at absolute CLOCK_MONOTONIC deadlines (nanosecond precision), so a wake
/// is never later than the kernel's own timer latency and never drifts with the loop's work.
pub struct Timer {
    fd: RawFd,
    armed_at: u64,
}

impl Timer {
    pub fn new() -> io::Result<Timer> {
        // SAFETY: plain syscall.
        let fd = check(unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        })?;
        Ok(Timer { fd, armed_at: 0 })
    }

    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// Fire at `deadline_ns` (absolute); re-arming at the same deadline costs nothing.
    pub fn arm(&mut self, deadline_ns: u64) -> io::Result<()> {
        if deadline_ns == self.armed_at {
            return Ok(());
        }
        let deadline_ns = deadline_ns.max(1); // 0 would disarm the timer
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: spec is valid; the old value is not wanted.
        check(unsafe {
            libc::timerfd_settime(
                self.fd,
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        })?;
        self.armed_at = deadline_ns;
        Ok(())
    }

    /// After an expiry: the next `arm` sets the timer again, which resets its expiry count
    /// (timerfd_settime), so epoll stops reporting it without a read() per wake.
    pub fn fired(&mut self) {
        self.armed_at = 0;
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        // SAFETY: the fd is ours.
        unsafe { libc::close(self.fd) };
    }
}

/// An epoll instance whose events carry a u64 token (a connection index or the timer's).
pub struct Poller {
    fd: RawFd,
    events: Vec<libc::epoll_event>,
}

impl Poller {
    pub fn new() -> io::Result<Poller> {
        // SAFETY: plain syscall.
        let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        let events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        Ok(Poller { fd, events })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, token: u64, writable: bool) -> io::Result<()> {
        self.ctl_flags(op, fd, token, true, writable)
    }

    fn ctl_flags(
        &self,
        op: libc::c_int,
        fd: RawFd,
        token: u64,
        readable: bool,
        writable: bool,
    ) -> io::Result<()> {
        let mut flags = 0u32;
        if readable {
            flags |= libc::EPOLLIN as u32;
        }
        if writable {
            flags |= libc::EPOLLOUT as u32;
        }
        let mut event = libc::epoll_event {
            events: flags,
            u64: token,
        };
        // SAFETY: event is valid for the call.
        check(unsafe { libc::epoll_ctl(self.fd, op, fd, &mut event) })?;
        Ok(())
    }

    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token, false)
    }

    /// Ask for EPOLLOUT while a connection has bytes the kernel would not take.
    pub fn set_writable(&self, fd: RawFd, token: u64, writable: bool) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, token, writable)
    }

    /// Both interests at once: a proxy stops asking for EPOLLIN once a side has ended
    /// (a socket at end of stream is always readable).
    pub fn set_interest(
        &self,
        fd: RawFd,
        token: u64,
        readable: bool,
        writable: bool,
    ) -> io::Result<()> {
        self.ctl_flags(libc::EPOLL_CTL_MOD, fd, token, readable, writable)
    }

    /// Stop watching `fd` (a socket shut both ways reports EPOLLHUP until it is removed).
    pub fn remove(&self, fd: RawFd) -> io::Result<()> {
        let mut event = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: event is valid for the call (ignored by DEL on current kernels).
        check(unsafe { libc::epoll_ctl(self.fd, libc::EPOLL_CTL_DEL, fd, &mut event) })?;
        Ok(())
    }

    /// Wait until something is ready (the timer bounds the wait); (token, readable,
    /// writable, hung up) per ready fd.
    pub fn wait(&mut self, out: &mut Vec<(u64, bool, bool, bool)>) -> io::Result<()> {
        self.wait_for(out, -1)
    }

    /// What is ready now, without blocking (the engine's spin before a due time). With
    /// nothing ready it yields the CPU, so another task woken on it (the --rtt delay proxy,
    /// due to forward a chunk) goes first instead of waiting behind the spin.
    pub fn poll(&mut self, out: &mut Vec<(u64, bool, bool, bool)>) -> io::Result<()> {
        self.wait_for(out, 0)?;
        if out.is_empty() {
            // SAFETY: sched_yield takes no arguments and cannot fail on Linux.
            unsafe { libc::sched_yield() };
        }
        Ok(())
    }

    fn wait_for(&mut self, out: &mut Vec<(u64, bool, bool, bool)>, timeout: i32) -> io::Result<()> {
        out.clear();
        // SAFETY: events has capacity for its length.
        let n = unsafe {
            libc::epoll_wait(
                self.fd,
                self.events.as_mut_ptr(),
                self.events.len() as i32,
                timeout,
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            return if err.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(err)
            };
        }
        for event in &self.events[..n as usize] {
            let flags = event.events;
            let hup = flags & (libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0;
            out.push((
                event.u64,
                flags & libc::EPOLLIN as u32 != 0,
                flags & libc::EPOLLOUT as u32 != 0,
                hup,
            ));
        }
        Ok(())
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        // SAFETY: the fd is ours.
        unsafe { libc::close(self.fd) };
    }
}
