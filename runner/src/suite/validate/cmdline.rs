//! Rules of a VM's kernel command line (`vms[].cmdline`, and the `cmdline` variant
//! axis): the line is split into parameters as the kernel splits it, and each must be a
//! row of one allowlist, [`PARAMETERS`] (or of the two families, `sysctl.<name>=value`
//! and the parameters of the modules in [`MODULES`]), with its value in that row's
//! grammar. Parameters the runner sets itself
//! ([`RUNNER_PARAMETERS`]) get a message
//! of their own. docs/src/suite-reference.md shows the table ([`reference_table`]; a
//! unit test keeps the two equal).

use crate::infra::qemu::args::{MAX_KERNEL_CMDLINE_BYTES, RUNNER_CMDLINE, RUNNER_PARAMETERS, RUNNER_PREFIX};
use crate::schema::text::{char_note, describe, shown};

use super::ValidationError;

/// What value a parameter takes.
#[derive(Debug, Clone, Copy)]
pub enum Grammar {
    /// None: the parameter alone (`quiet`).
    Flag,
    /// A decimal whole number from `min` to `max`.
    Int {
        /// Least value.
        min: i64,
        /// Greatest value.
        max: i64,
    },
    /// One of these words, exactly.
    OneOf(&'static [&'static str]),
    /// A size as the kernel's `memparse` reads it: a decimal or `0x` number with an
    /// optional K, M, G, T, P or E suffix.
    Size,
    /// A CPU list: comma-separated CPU numbers and ranges (`0,2-3`).
    CpuList,
    /// Text of ASCII letters and digits and the characters of `extra`; with `spaces`,
    /// also spaces (the value then needs double quotes).
    Text {
        /// Characters allowed besides letters and digits.
        extra: &'static str,
        /// Whether spaces are allowed.
        spaces: bool,
    },
}

/// One kernel parameter a suite may give: its name (as the kernel documents it,
/// Documentation/admin-guide/kernel-parameters.txt), its value's grammar and what it
/// is for.
#[derive(Debug, Clone, Copy)]
pub struct Parameter {
    /// The name; the kernel reads `-` and `_` in names alike, and so does the check.
    pub name: &'static str,
    /// The value's grammar.
    pub grammar: Grammar,
    /// What it does, for the reference table.
    pub what: &'static str,
}

const fn p(name: &'static str, grammar: Grammar, what: &'static str) -> Parameter {
    Parameter { name, grammar, what }
}

const BIT: Grammar = Grammar::Int { min: 0, max: 1 };
const ON_OFF: Grammar = Grammar::OneOf(&["on", "off"]);
const NAMES: Grammar = Grammar::Text { extra: "_-,", spaces: false };
const DYNDBG: Grammar = Grammar::Text { extra: "_.:,+-=*/", spaces: true };
/// What a module parameter (`nfs.<param>=value`) may hold.
const MODULE_VALUE: Grammar = Grammar::Text { extra: "_.:,+-", spaces: false };

/// The kernel parameters a suite may give, one row each: what the shipped suites use
/// and what a kernel developer reproducing a regression reaches for (log levels,
/// tracing and debugging aids, mitigations, timers and clocks, memory debugging, CPU
/// isolation). Anything else is refused: an unknown `name=value` would reach the
/// guest's init as an environment variable, an unknown word as an argument.
pub const PARAMETERS: &[Parameter] = &[
    p("quiet", Grammar::Flag, "fewer boot messages on the console"),
    p("debug", Grammar::Flag, "every kernel message on the console"),
    p("loglevel", Grammar::Int { min: 0, max: 8 }, "console log level: 0 (emergencies) to 7 (debug); 8 shows all"),
    p("ignore_loglevel", Grammar::Flag, "print every message whatever its level"),
    p("printk.time", Grammar::OneOf(&["0", "1", "y", "n", "Y", "N"]), "timestamps on kernel messages"),
    p("printk.devkmsg", Grammar::OneOf(&["on", "off", "ratelimit"]), "user-space writes to /dev/kmsg"),
    p("initcall_debug", Grammar::Flag, "log every initcall and its duration"),
    p("dyndbg", DYNDBG, "dynamic debug queries, e.g. \"module nfs +p\" (also `<module>.dyndbg=+p`)"),
    p("nokaslr", Grammar::Flag, "no kernel address randomisation (stable addresses for oopses and gdb)"),
    p("norandmaps", Grammar::Flag, "no address randomisation for user space"),
    p("mitigations", Grammar::OneOf(&["off", "auto", "auto,nosmt"]), "CPU vulnerability mitigations"),
    p("pti", Grammar::OneOf(&["on", "off", "auto"]), "page table isolation"),
    p("nopti", Grammar::Flag, "no page table isolation"),
    p(
        "spectre_v2",
        Grammar::OneOf(&[
            "on",
            "off",
            "auto",
            "retpoline",
            "retpoline,generic",
            "retpoline,lfence",
            "eibrs",
            "eibrs,retpoline",
            "eibrs,lfence",
            "ibrs",
        ]),
        "Spectre v2 mitigation",
    ),
    p(
        "spec_store_bypass_disable",
        Grammar::OneOf(&["on", "off", "auto", "prctl", "seccomp"]),
        "Speculative Store Bypass mitigation",
    ),
    p("mds", Grammar::OneOf(&["off", "full", "full,nosmt"]), "MDS mitigation"),
    p("tsx", Grammar::OneOf(&["on", "off", "auto"]), "Intel TSX"),
    p("transparent_hugepage", Grammar::OneOf(&["always", "madvise", "never"]), "transparent huge pages"),
    p("numa_balancing", Grammar::OneOf(&["enable", "disable"]), "automatic NUMA balancing"),
    p("preempt", Grammar::OneOf(&["none", "voluntary", "full"]), "preemption model (kernels with PREEMPT_DYNAMIC)"),
    p("threadirqs", Grammar::Flag, "interrupt handlers in threads"),
    p("nohz", ON_OFF, "tickless idle"),
    p("highres", ON_OFF, "high-resolution timers"),
    p(
        "clocksource",
        Grammar::OneOf(&["tsc", "kvm-clock", "hpet", "acpi_pm", "refined-jiffies", "jiffies"]),
        "the clock source",
    ),
    p("tsc", Grammar::OneOf(&["reliable", "noirqtime", "unstable", "nowatchdog"]), "how the TSC is trusted"),
    p("no_timer_check", Grammar::Flag, "skip the timer IRQ check (slow under TCG)"),
    p("idle", Grammar::OneOf(&["poll", "halt", "nomwait"]), "the idle loop"),
    p("nowatchdog", Grammar::Flag, "no soft or hard lockup watchdog"),
    p("nosoftlockup", Grammar::Flag, "no soft lockup watchdog"),
    p("nmi_watchdog", Grammar::OneOf(&["0", "1", "panic", "nopanic"]), "the NMI (hard lockup) watchdog"),
    p("softlockup_panic", BIT, "panic on a soft lockup (the VM then shows as crashed)"),
    p("hung_task_panic", BIT, "panic on a hung task"),
    p("panic_on_warn", BIT, "panic on a WARN()"),
    p("oops", Grammar::OneOf(&["panic"]), "panic on an oops"),
    p("audit", BIT, "the audit subsystem"),
    p("selinux", BIT, "SELinux"),
    p("apparmor", BIT, "AppArmor"),
    p("ipv6.disable", BIT, "IPv6"),
    p("random.trust_cpu", ON_OFF, "seed the RNG from the CPU"),
    p("init_on_alloc", BIT, "zero pages and objects on allocation"),
    p("init_on_free", BIT, "zero pages and objects on free"),
    p("page_poison", Grammar::OneOf(&["on", "off", "0", "1"]), "poison freed pages"),
    p("slab_nomerge", Grammar::Flag, "no merging of slab caches"),
    p("slub_debug", Grammar::Text { extra: "_-,", spaces: false }, "SLUB debugging flags[,caches]"),
    p("kfence.sample_interval", Grammar::Int { min: 0, max: 1_000_000 }, "KFENCE sampling, ms (0: off)"),
    p(
        "ftrace",
        Grammar::OneOf(&["function", "function_graph", "nop", "wakeup", "wakeup_rt", "irqsoff", "preemptoff", "blk"]),
        "start this tracer at boot",
    ),
    p("trace_event", Grammar::Text { extra: "_:*,", spaces: false }, "trace events to enable at boot (`sunrpc:*`)"),
    p("trace_buf_size", Grammar::Size, "trace buffer size per CPU"),
    p("tp_printk", Grammar::Flag, "trace events also to the console"),
    p("ftrace_dump_on_oops", Grammar::Flag, "dump the trace buffer on an oops"),
    p("traceoff_on_warning", Grammar::Flag, "stop tracing at a WARN()"),
    p("isolcpus", Grammar::CpuList, "keep these CPUs out of the scheduler's balancing"),
    p("nohz_full", Grammar::CpuList, "tickless CPUs"),
    p("rcu_nocbs", Grammar::CpuList, "CPUs without RCU callbacks"),
    p("irqaffinity", Grammar::CpuList, "CPUs for interrupts"),
    p("mem", Grammar::Size, "use at most this much memory; not below the VM's `memory:`"),
    p(
        "memmap",
        Grammar::Text { extra: "@$!#,", spaces: false },
        "reserve memory (`nn$ss`, `nn!ss`, `nn#ss`); no map of its own (`exactmap`, `nn@ss`), not all of memory",
    ),
    p("module_blacklist", NAMES, "modules not to load; not the drivers the guest boots with"),
    p("modprobe.blacklist", NAMES, "modules modprobe won't load; not the drivers the guest boots with"),
    p("initcall_blacklist", NAMES, "initcalls not to run; not those of the drivers the guest boots with"),
];

/// Modules whose parameters a suite may set as `<module>.<param>[=value]` (the
/// parameter `[a-z0-9_]+`, the value letters, digits and `_ . : , + -`), with what
/// they are: NFS and its RPC layers, the guest's NIC driver, RCU and workqueues.
pub const MODULES: &[(&str, &str)] = &[
    ("nfs", "NFS client"),
    ("nfsv3", "NFSv3 client"),
    ("nfsv4", "NFSv4 client"),
    ("nfsd", "NFS server"),
    ("sunrpc", "ONC RPC transport"),
    ("lockd", "NFS lock manager"),
    ("auth_rpcgss", "RPCSEC_GSS"),
    ("rpcsec_gss_krb5", "Kerberos for RPCSEC_GSS"),
    ("virtio_net", "the guest's NIC driver"),
    ("rcupdate", "RCU"),
    ("rcutree", "RCU"),
    ("workqueue", "workqueues"),
];

/// What `g` accepts, in words.
fn grammar_text(g: &Grammar) -> String {
    match g {
        Grammar::Flag => "no value".into(),
        Grammar::Int { min, max } => format!("a whole number from {min} to {max}"),
        Grammar::OneOf(words) => format!("one of {}", words.join(" | ")),
        Grammar::Size => "a size: a number with an optional K, M or G".into(),
        Grammar::CpuList => "a CPU list such as 0,2-3".into(),
        Grammar::Text { extra, spaces } => {
            let chars: Vec<String> = extra.chars().map(|c| c.to_string()).collect();
            let sp = if *spaces { ", spaces (in double quotes)" } else { "" };
            format!("letters, digits and {}{sp}", chars.join(" "))
        }
    }
}

/// Whether `value` (quotes removed) matches `g`; `None` for a parameter given without
/// `=`.
fn matches(g: &Grammar, value: Option<&str>) -> bool {
    match (g, value) {
        (Grammar::Flag, v) => v.is_none(),
        (_, None) => false,
        (Grammar::Int { min, max }, Some(v)) => {
            v.bytes().all(|b| b.is_ascii_digit() || b == b'-') && v.parse::<i64>().is_ok_and(|n| n >= *min && n <= *max)
        }
        (Grammar::OneOf(words), Some(v)) => words.contains(&v),
        (Grammar::Size, Some(v)) => memparse(v).is_some(),
        (Grammar::CpuList, Some(v)) => v.split(',').all(|r| {
            let mut ends = r.splitn(2, '-').map(|n| {
                (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then(|| n.parse::<u32>().ok()).flatten()
            });
            match (ends.next().flatten(), ends.next()) {
                (Some(_), None) => true,
                (Some(a), Some(Some(b))) => a <= b,
                _ => false,
            }
        }),
        (Grammar::Text { extra, spaces }, Some(v)) => {
            !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || extra.contains(c) || (*spaces && c == ' '))
        }
    }
}

/// One kernel parameter as the kernel reads it (`next_arg` in lib/cmdline.c): the
/// token as written, its name and value with the quotes the kernel strips removed.
struct Token<'a> {
    written: &'a str,
    name: String,
    value: Option<String>,
}

/// Splits `line` as `next_arg` does: at spaces outside double quotes; a leading `"`
/// and the `"` ending the token are dropped, and so is a `"` opening the value (with
/// the one ending it). A quote anywhere else stays in the name or value, where no
/// grammar takes it.
fn tokens(line: &str) -> Result<Vec<Token<'_>>, String> {
    let mut out = Vec::new();
    let mut start = None;
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => {
                quoted = !quoted;
                start.get_or_insert(i);
            }
            ' ' if !quoted => {
                if let Some(s) = start.take() {
                    out.push(&line[s..i]);
                }
            }
            _ => {
                start.get_or_insert(i);
            }
        }
    }
    if quoted {
        return Err("has an unclosed '\"'; the kernel would take the rest of the line as one parameter".into());
    }
    if let Some(s) = start {
        out.push(&line[s..]);
    }
    Ok(out
        .into_iter()
        .map(|written| {
            let (mut t, lead) = match written.strip_prefix('"') {
                Some(r) => (r, true),
                None => (written, false),
            };
            let (name, value) = match t.split_once('=') {
                None => {
                    if lead {
                        t = t.strip_suffix('"').unwrap_or(t);
                    }
                    (t.to_string(), None)
                }
                Some((n, v)) => {
                    let v = match v.strip_prefix('"') {
                        Some(inner) => inner.strip_suffix('"').unwrap_or(inner),
                        None if lead => v.strip_suffix('"').unwrap_or(v),
                        None => v,
                    };
                    (n.to_string(), Some(v.to_string()))
                }
            };
            Token { written, name, value }
        })
        .collect())
}

/// Why parameter `t` may not be on a suite's command line, or `None`.
fn token_problem(t: &Token<'_>, memory_mib: u64) -> Option<String> {
    // Printable ASCII by now (checked first); long tokens are cut.
    let w = match t.written.char_indices().nth(60) {
        Some((i, _)) => format!("`{}…`", &t.written[..i]),
        None => format!("`{}`", t.written),
    };
    // The kernel compares parameter names with '-' and '_' alike (and reads
    // `sysctl/kernel/panic` as `sysctl.kernel.panic`).
    let name = t.name.replace('-', "_").replace('/', ".");
    if let Some((owned, why)) = RUNNER_PARAMETERS.iter().find(|(o, _)| o.replace('-', "_") == name) {
        return Some(format!("{w}: the runner sets `{owned}` itself ({why}); remove it from cmdline"));
    }
    if name.starts_with(RUNNER_PREFIX) {
        return Some(format!(
            "{w} is one of the runner's own parameters ({RUNNER_PREFIX}hostname, {RUNNER_PREFIX}ip, {RUNNER_PREFIX}mtu, read by the guest's init, which would configure eth0 behind the runner's back); remove it from cmdline"
        ));
    }
    if t.name.contains('"') || t.value.as_deref().is_some_and(|v| v.contains('"')) {
        return Some(format!(
            "{w} has a '\"' inside its name or value, which the kernel keeps; quote a whole parameter (\"name=a b\") or its value (name=\"a b\")"
        ));
    }
    let value = t.value.as_deref();
    let bad_value = |g: &Grammar, what: &str| {
        Some(format!(
            "{w}: {what} takes {}; see the kernel command line table in docs/src/suite-reference.md",
            grammar_text(g)
        ))
    };
    if let Some(row) = PARAMETERS.iter().find(|r| r.name.replace('-', "_") == name) {
        if !matches(&row.grammar, value) {
            return bad_value(&row.grammar, row.name);
        }
        return value
            .and_then(|v| boot_parameter_problem(&name, v, memory_mib))
            .map(|why| format!("{w}: {why}; remove it from cmdline"));
    }
    if let Some(sysctl) = name.strip_prefix("sysctl.") {
        let original = &t.name["sysctl.".len()..];
        if !super::sysctl::is_sysctl_name(original) {
            return Some(format!(
                "{w}: {} is not a sysctl name (two or more parts of lower case letters, digits, '_' and '-', joined by '.' or '/')",
                shown(original, 60)
            ));
        }
        return match value {
            Some(v) if super::sysctl::value_problem(v).is_none() => None,
            Some(v) => Some(format!("{w}: {}", super::sysctl::value_problem(v).unwrap_or_default())),
            None => Some(format!("{w}: a sysctl on the command line needs a value (sysctl.{sysctl}=VALUE)")),
        };
    }
    if let Some((module, param)) = name.split_once('.') {
        if let Some((m, _)) = MODULES.iter().find(|(m, _)| *m == module) {
            if param.is_empty() || !param.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
                return Some(format!("{w}: {} is not a parameter name of module {m} ([a-z0-9_]+)", shown(param, 60)));
            }
            let g = if param == "dyndbg" { DYNDBG } else { MODULE_VALUE };
            return match value {
                Some(v) if !matches(&g, Some(v)) => bad_value(&g, &format!("{m}.{param}")),
                _ => None,
            };
        }
        let known: Vec<&str> = MODULES.iter().map(|(m, _)| *m).collect();
        return Some(format!(
            "{w}: parameters of module {} are not among those a suite may set (modules: {}; see the kernel command line table in docs/src/suite-reference.md)",
            shown(module, 40),
            known.join(", ")
        ));
    }
    if value.is_some()
        && !t.name.is_empty()
        && t.name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    {
        // The kernel passes parameters it doesn't know to init, `NAME=value` as
        // environment: `PATH=/x` would break the guest's init scripts.
        return Some(format!(
            "{w} is not a kernel parameter; the kernel would pass it to the guest's init as an environment variable, where it can break the boot"
        ));
    }
    Some(format!(
        "{w} is not among the kernel parameters a suite may give (quiet, loglevel=N, nokaslr, mitigations=, dyndbg=, sysctl.<name>=, nfs.<param>=, …: the kernel command line table in docs/src/suite-reference.md); the kernel would pass an unknown one to the guest's init"
    ))
}

/// Checks `vms[].cmdline` (at key path `key`) of a VM of `memory_mib` MiB: printable
/// ASCII, balanced quotes, no `--` (the runner's init takes no arguments), every
/// parameter a row of [`PARAMETERS`], a `sysctl.<name>=value` or a parameter of one
/// of [`MODULES`], with its value in the row's grammar, none of the runner's own, and
/// the runner's part and this within [`MAX_KERNEL_CMDLINE_BYTES`]. Each problem is one
/// [`ValidationError::Rule`] at `key`, naming the parameter.
pub(super) fn check_cmdline(errs: &mut Vec<ValidationError>, key: &str, line: &str, memory_mib: u64) {
    let mut rule = |message: String| errs.push(ValidationError::Rule { key: key.into(), message });
    if let Some(c) = line.chars().find(|c| !(' '..='~').contains(c)) {
        let what = if c.is_ascii() { format!("the control character {}", describe(c)) } else { char_note(c) };
        rule(format!("the kernel command line holds {what}; it takes printable ASCII only"));
        return;
    }
    let tokens = match tokens(line) {
        Ok(t) => t,
        Err(why) => return rule(format!("the kernel command line {why}")),
    };
    for t in &tokens {
        if t.written == "--" {
            rule("`--` hands the rest of the line to the runner's init, which takes no arguments; remove it and what follows".into());
            break;
        }
        if let Some(why) = token_problem(t, memory_mib) {
            rule(why);
        }
    }
    // The host's own additions (VMREPRO_HOST_CMDLINE) are not the suite's to answer for.
    let full = RUNNER_CMDLINE.len() + 1 + line.len();
    if full > MAX_KERNEL_CMDLINE_BYTES {
        rule(format!(
            "the kernel command line would be {full} bytes ({} of them the runner's); at most {MAX_KERNEL_CMDLINE_BYTES} bytes boot reliably (Debian's 5.10 kernel stopped early in boot with 2.4 KiB)",
            RUNNER_CMDLINE.len()
        ));
    }
}

/// The allowlist as the Markdown table docs/src/suite-reference.md shows: one row per
/// [`PARAMETERS`] entry, then the two families.
/// (Only the tests call it: they check the docs hold it.)
#[cfg_attr(vmrepro_dead_code, allow(dead_code))]
pub fn reference_table() -> String {
    let mut s = String::from("| parameter | value | what for |\n|---|---|---|\n");
    for r in PARAMETERS {
        s.push_str(&format!("| `{}` | {} | {} |\n", r.name, grammar_text(&r.grammar).replace('|', "\\|"), r.what));
    }
    s.push_str(
        "| `sysctl.<name>` | a sysctl value (as for `vms[].sysctl`) | a sysctl set at boot (kernels from 5.8) |\n",
    );
    let modules: Vec<String> = MODULES.iter().map(|(m, what)| format!("`{m}` ({what})")).collect();
    s.push_str(&format!(
        "| `<module>.<param>` | {} | module parameters of {} |\n",
        grammar_text(&MODULE_VALUE),
        modules.join(", ")
    ));
    s
}

/// Drivers and file systems the guest boots with, as parts of module names
/// (`virtio_blk`) and initcall names (`virtio_blk_init`, `ext4_init_fs`): the virtio
/// transport, disk, NIC and console, ext4 and its journal, the serial port.
pub const BOOT_DRIVERS: &[&str] = &["virtio", "ext4", "jbd2", "mbcache", "crc32c", "8250"];

/// Why kernel parameter `name=value` (name with `-` read as `_`) can't boot a VM of
/// `memory_mib` MiB or takes what it boots with, or `None`: `mem=` below the VM's
/// memory; `memmap=exactmap` or `memmap=nn@ss` (a new memory map), or a `memmap=`
/// reservation of the whole memory; `module_blacklist=`, `modprobe.blacklist=` or
/// `initcall_blacklist=` naming one of [`BOOT_DRIVERS`].
fn boot_parameter_problem(name: &str, value: &str, memory_mib: u64) -> Option<String> {
    match name {
        "mem" => {
            let bytes = memparse(value)?;
            (bytes < memory_mib << 20).then(|| {
                format!("limits the guest to {} of the VM's {memory_mib} MiB; set memory: instead", size_text(bytes))
            })
        }
        "memmap" => value.split(',').find_map(|m| {
            if m == "exactmap" {
                return Some("replaces the guest's memory map, which QEMU makes from memory:".to_string());
            }
            let Some(i) = m.find(['@', '$', '!', '#']) else {
                return Some(format!("{m} is not a reservation (nn$ss, nn!ss or nn#ss: size, then start)"));
            };
            let (Some(size), Some(_)) = (memparse(&m[..i]), memparse(&m[i + 1..])) else {
                return Some(format!("{m} is not a reservation (nn$ss, nn!ss or nn#ss: size, then start)"));
            };
            if m[i..].starts_with('@') {
                Some(format!("gives the guest a memory map of its own ({m}); set memory: instead"))
            } else {
                (size >= memory_mib << 20).then(|| {
                    format!(
                        "reserves {} of the VM's {memory_mib} MiB, leaving it nothing to boot with",
                        size_text(size)
                    )
                })
            }
        }),
        "module_blacklist" | "modprobe.blacklist" | "initcall_blacklist" => {
            let hit = value.split(',').find(|d| {
                let d = d.replace('-', "_");
                BOOT_DRIVERS.iter().any(|b| d.contains(b))
            })?;
            Some(format!(
                "keeps {hit} from loading, and the guest boots with it (its disk, NIC, console and file system: {})",
                BOOT_DRIVERS.join(", ")
            ))
        }
        _ => None,
    }
}

/// The kernel's `memparse`: a number (decimal, or `0x` hexadecimal) with an optional
/// K, M, G, T, P or E suffix (either case), in bytes (saturating); `None` if `s` is
/// not one.
fn memparse(s: &str) -> Option<u64> {
    let (digits, radix) = match s.strip_prefix("0x") {
        Some(h) => (h, 16),
        None => (s, 10),
    };
    let end = digits.find(|c: char| !c.is_digit(radix)).unwrap_or(digits.len());
    let (num, suffix) = digits.split_at(end);
    let n = u64::from_str_radix(num, radix).ok()?;
    let shift = match suffix {
        "" => 0,
        "k" | "K" => 10,
        "m" | "M" => 20,
        "g" | "G" => 30,
        "t" | "T" => 40,
        "p" | "P" => 50,
        "e" | "E" => 60,
        _ => return None,
    };
    n.checked_shl(shift).filter(|v| v >> shift == n).or(Some(u64::MAX))
}

/// Bytes as the message gives them (`1 MiB`, `4096 bytes`).
fn size_text(b: u64) -> String {
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{} MiB", b >> 20)
    } else {
        format!("{b} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(line: &str) -> Vec<String> {
        let mut errs = Vec::new();
        check_cmdline(&mut errs, "vms[0].cmdline", line, 512);
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn allowed_lines() {
        for ok in [
            "quiet loglevel=3 nfs.nfs4_disable_idmapping=0",
            "dyndbg=\"module nfs +p\" sunrpc.dyndbg=+p",
            "\"dyndbg=file svc.c +p\"",
            "mitigations=auto,nosmt nokaslr printk.time=1",
            "sysctl.net.ipv4.ip_forward=1 sysctl.net.ipv4.tcp_rmem=\"4096 87380 6291456\"",
            "isolcpus=1,2-3 nohz_full=1-3 clocksource=kvm-clock",
            "mem=512M memmap=64M$1G module_blacklist=floppy,snd",
            "trace_event=sunrpc:*,nfs:nfs_getattr_enter trace_buf_size=4M",
            "no-timer-check spec-store-bypass-disable=auto",
            "",
        ] {
            assert_eq!(errors(ok), Vec::<String>::new(), "{ok}");
        }
    }

    #[test]
    fn refused_lines() {
        for (bad, says) in [
            ("rdinit=/bin/sh", "the runner sets `rdinit`"),
            ("quiet \"init=/bin/sh\"", "the runner sets `init`"),
            ("root=/dev/sda", "the runner sets `root`"),
            ("net.ifnames=1", "the runner sets `net.ifnames`"),
            ("sysctl/kernel/panic=0", "the runner sets `sysctl.kernel.panic`"),
            ("quiet -- vmrepro.ip=10.0.0.1/8", "`--` hands the rest"),
            ("vmrepro.ip=10.0.0.1/8", "runner's own parameters"),
            ("PATH=/nowhere", "environment variable"),
            ("foo=bar", "not among the kernel parameters"),
            ("single", "not among the kernel parameters"),
            ("loglevel=9", "a whole number from 0 to 8"),
            ("loglevel", "a whole number from 0 to 8"),
            ("quiet=1", "takes no value"),
            ("mitigations=maybe", "one of off | auto"),
            ("isolcpus=3-1", "CPU list"),
            ("nfs.callback_tcpport=$(reboot)", "nfs.callback_tcpport takes letters"),
            ("nfs.Bad=1", "not a parameter name of module nfs"),
            ("ext4.foo=1", "parameters of module \"ext4\""),
            ("sysctl.-p=1", "not a sysctl name"),
            ("sysctl.net.ipv4.ip_forward", "needs a value"),
            ("sysctl.vm.x=;reboot", "not a sysctl value"),
            ("dyndbg=a\"b\"c", "'\"' inside"),
            ("mem=1M", "limits the guest to 1 MiB"),
            ("memmap=exactmap", "replaces the guest's memory map"),
            ("module_blacklist=snd,virtio-net", "keeps virtio-net from loading"),
            ("foo=\"unclosed", "unclosed"),
            ("a\u{1b}b", "U+001B"),
        ] {
            let errs = errors(bad);
            assert!(errs.iter().any(|e| e.contains(says)), "{bad}: {errs:?}");
        }
        assert!(errors(&"quiet ".repeat(300))[0].contains("at most 1536"));
    }

    #[test]
    fn kernel_splitting() {
        let t = tokens(r#"a "b=c d" e="f g" "h""#).unwrap();
        let got: Vec<(&str, Option<&str>)> = t.iter().map(|t| (t.name.as_str(), t.value.as_deref())).collect();
        assert_eq!(got, [("a", None), ("b", Some("c d")), ("e", Some("f g")), ("h", None)]);
    }

    /// Not the host's `VMREPRO_HOST_CMDLINE`: the check reads nothing but the suite.
    #[test]
    fn the_host_line_is_not_the_suites() {
        assert!(!RUNNER_CMDLINE.contains(crate::infra::qemu::args::HOST_CMDLINE_ENV));
        assert_eq!(errors(&"quiet ".repeat(200)), Vec::<String>::new());
    }

    #[test]
    fn the_table_is_in_the_reference() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/src/suite-reference.md");
        let doc = std::fs::read_to_string(path).expect("docs/src/suite-reference.md");
        let table = reference_table();
        assert!(doc.contains(&table), "docs/src/suite-reference.md must hold this table:\n{table}");
    }

    #[test]
    fn boot_parameters() {
        assert_eq!(memparse("1M"), Some(1 << 20));
        assert_eq!(memparse("512m"), Some(512 << 20));
        assert_eq!(memparse("0x1000"), Some(4096));
        assert_eq!(memparse("2G"), Some(2 << 30));
        assert_eq!(memparse("x"), None);
        for (n, v) in [
            ("mem", "1M"),
            ("mem", "511M"),
            ("mem", "4096"),
            ("memmap", "exactmap"),
            ("memmap", "100M@0"),
            ("memmap", "1G$0"),
            ("memmap", "1G"),
            ("module_blacklist", "virtio_blk"),
            ("module_blacklist", "snd,virtio-net"),
            ("modprobe.blacklist", "ext4"),
            ("initcall_blacklist", "virtio_pci_driver_init"),
            ("initcall_blacklist", "serial8250_init"),
        ] {
            assert!(boot_parameter_problem(n, v, 512).is_some(), "{n}={v}");
        }
        for (n, v) in
            [("mem", "512M"), ("mem", "1G"), ("memmap", "64M$1G"), ("module_blacklist", "snd,floppy"), ("quiet", "")]
        {
            assert_eq!(boot_parameter_problem(n, v, 512), None, "{n}={v}");
        }
    }
}
