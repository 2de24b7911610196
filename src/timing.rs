//! Process timing shared by the pipeline steps (`--timings`): a ground-floor module that
//! imports nothing from the crate.

/// User + system CPU seconds of this process so far (every thread), from `/proc/self/stat`
/// (fields 14 and 15, in clock ticks of 1/100 s, the Linux `USER_HZ`); `None` elsewhere.
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is parenthesized and may hold spaces: split after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (the state), so fields 14 and 15 are at 11 and 12.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}
