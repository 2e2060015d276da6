//! The guest script of one measured iteration, and reading its output back.
//!
//! The script prints every output it collects as a **section**: a marker line
//! ([`SECTION_MARKER`] + the section's name + ` bytes=N`) followed by exactly the N
//! bytes of output and a newline, whatever the output holds (no trailing newline,
//! lines that look like markers, binary bytes). [`Section`] is the
//! one definition of the section names: [`iteration_script`] writes them and
//! [`Sections::get`] reads them, so a misspelt section is a compile error, not an empty
//! text at run time.
//!
//! One iteration, in order (every command runs with `/bin/sh -c` in the guest, its
//! files in the folder [`iteration_dir`]):
//!
//! 0. a line in the kernel log ([`iteration_mark`]), where a hang's dmesg starts;
//! 1. `setup` (section `setup`, stdout and stderr); if it fails: its exit status
//!    (section `setup-exit`), `teardown`, exit 10;
//! 2. the records with `when: before` (section `<name>`, stdout and stderr);
//! 3. every observer (section `before-<observer>`), then `uname -r` (`uname`);
//! 4. `run`, timed by GNU time (`/usr/bin/time -o`): its report in `time`, the command's
//!    stdout and stderr (first 64 KiB each) in `stdout` and `stderr`; the guest's clock
//!    read (`date +%s%N`, nanoseconds) when the script started and right before and
//!    after `run`, in `clock` ([`Clock`]): the elapsed time with a resolution of 1 ns
//!    (GNU time's has 10 ms), and where in the step `run` was;
//! 5. every observer again (section `<observer>`), the file of `metric: {from: {file:
//!    PATH}}` (section `metric-file`, its first [`METRIC_FILE_KEPT_BYTES`]), then the
//!    records with `when: after`;
//! 6. `teardown` (section `teardown`); if it fails: exit 12.
//!
//! The run command's own exit status does not fail the step: GNU time reports it
//! ("Command exited with non-zero status N") and the analysis compares it with the
//! measurement's `expect_exit`. Exit 9: the guest could not make a temp folder.
//!
//! When the iteration hangs, the runner reads `run`'s output so far from that folder
//! ([`partial_output_script`]): the agent gives a process's output only once it ended.

use std::collections::BTreeMap;

use crate::plan::measurement::{Commands, Observer, ObserverKind, Record, When};
use crate::plan::shell_quote;

/// Marker line the measurement script prints before each section of its output.
pub const SECTION_MARKER: &str = "### vmrepro section: ";

/// Most bytes of the run command's stdout and stderr kept (each).
pub const OUTPUT_KEPT_BYTES: usize = 64 * 1024;

/// Most bytes kept of the file a measurement's metric is read from.
pub const METRIC_FILE_KEPT_BYTES: usize = 1024 * 1024;

/// Exit status of the iteration script when `setup` failed.
pub const EXIT_SETUP_FAILED: i32 = 10;
/// Exit status of the iteration script when `teardown` failed.
pub const EXIT_TEARDOWN_FAILED: i32 = 12;
/// Exit status of the iteration script when the guest could not make a temp folder.
pub const EXIT_NO_TEMP: i32 = 9;

/// One section of an iteration's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section<'a> {
    /// Output of `setup`.
    Setup,
    /// `uname -r`.
    Uname,
    /// GNU time's report on `run`.
    Time,
    /// The guest clock around `run` ([`Clock`]).
    Clock,
    /// `run`'s stdout (first [`OUTPUT_KEPT_BYTES`]).
    Stdout,
    /// `run`'s stderr (first [`OUTPUT_KEPT_BYTES`]).
    Stderr,
    /// Output of `teardown`.
    Teardown,
    /// `setup`'s exit status, printed only when it failed.
    SetupExit,
    /// The file the measurement's metric is read from (first [`METRIC_FILE_KEPT_BYTES`]).
    MetricFile,
    /// An observer before `run`.
    Before(ObserverKind),
    /// An observer after `run`.
    After(ObserverKind),
    /// A record (a named command of the measurement).
    Record(&'a str),
}

/// Section names that a record may not take.
pub const BUILTIN_SECTIONS: &[&str] =
    &["setup", "uname", "time", "clock", "stdout", "stderr", "teardown", "setup-exit", "metric-file"];

impl Section<'_> {
    /// The section's name in the script's output: `setup`, `before-netstat`, `netstat`, …
    pub fn name(&self) -> String {
        match self {
            Section::Setup => "setup".into(),
            Section::Uname => "uname".into(),
            Section::Time => "time".into(),
            Section::Clock => "clock".into(),
            Section::Stdout => "stdout".into(),
            Section::Stderr => "stderr".into(),
            Section::Teardown => "teardown".into(),
            Section::SetupExit => "setup-exit".into(),
            Section::MetricFile => "metric-file".into(),
            Section::Before(k) => format!("before-{}", k.name()),
            Section::After(k) => k.name().into(),
            Section::Record(name) => (*name).into(),
        }
    }
}

/// The guest folder of iteration step `step`'s files (`stdout`, `stderr`, `time`, …),
/// removed when the script exits.
pub fn iteration_dir(step: &str) -> String {
    format!("/tmp/vmrepro-iteration-{step}")
}

/// The line iteration step `step` writes into the guest's kernel log (`/dev/kmsg`) as
/// it begins.
pub fn iteration_mark(step: &str) -> String {
    format!("vmrepro: iteration {step} begins")
}

/// The guest's kernel log device, where [`iteration_mark`] goes.
const KMSG: &str = "/dev/kmsg";

/// The guest script that prints what iteration step `step`'s `run` wrote so far to its
/// stdout and stderr (the first [`OUTPUT_KEPT_BYTES`] of each), as the sections
/// `stdout` and `stderr` of an iteration's output (empty when the iteration had not
/// got that far). Run after the iteration timed out, while its command may still be
/// running; exits 0.
pub fn partial_output_script(step: &str) -> String {
    let dir = shell_quote(&iteration_dir(step));
    let head = |file: &str| format!("head -c {OUTPUT_KEPT_BYTES} \"$s/{file}\" 2>/dev/null");
    format!(
        "{}\ns={dir}\nd=$(mktemp -d) || exit {EXIT_NO_TEMP}\ntrap 'rm -rf \"$d\"' EXIT\n{}\n{}\nexit 0\n",
        section_fn(),
        framed(Section::Stdout, &head("stdout")),
        framed(Section::Stderr, &head("stderr")),
    )
}

/// The definition of the shell function `{SECTION_FN} NAME`, which prints the section
/// kept in "$d/sec" with its length in bytes (so that no output can end or fake a
/// section) and returns the status the command before it ended with.
fn section_fn() -> String {
    format!(
        "{SECTION_FN}() {{ r=$?; n=$(wc -c < \"$d/sec\"); printf '%s%s {LENGTH_KEY}%s\\n' '{SECTION_MARKER}' \"$1\" \"$((n))\"; cat \"$d/sec\"; echo; return $r; }}"
    )
}

/// The guest script of iteration step `step` (see the module docs); `metric_file`: the
/// file the measurement's metric is read from, if it is a file.
pub fn iteration_script(
    step: &str,
    commands: &Commands,
    observers: &[Observer],
    records: &[Record],
    metric_file: Option<&str>,
) -> String {
    let mut s = String::new();
    let sec = |s: &mut String, section: Section<'_>, cmd: &str| {
        s.push_str(&format!("{}\n", framed(section, cmd)));
    };
    // `{SECTION_FN} NAME` prints the section kept in "$d/sec" with its length in bytes
    // (so that no output can end or fake a section) and returns the status the
    // command before it ended with.
    s.push_str(&format!("{}\n", section_fn()));
    s.push_str(&format!("{CLOCK_SCRIPT}=$({CLOCK_READ})\n"));
    s.push_str(&format!("echo {} 2>/dev/null > {KMSG} || :\n", shell_quote(&iteration_mark(step))));
    let dir = shell_quote(&iteration_dir(step));
    s.push_str(&format!("d={dir}; rm -rf \"$d\"; mkdir -p \"$d\" || exit {EXIT_NO_TEMP}\n"));
    s.push_str("trap 'rm -rf \"$d\"' EXIT\n");
    let teardown = commands.teardown.as_deref().map(shell_quote);
    if let Some(setup) = &commands.setup {
        s.push_str(&format!(
            "{} || {{ s=$?; {}; {}exit {EXIT_SETUP_FAILED}; }}\n",
            framed(Section::Setup, &format!("sh -c {} 2>&1", shell_quote(setup))),
            framed(Section::SetupExit, "echo $s"),
            teardown
                .as_ref()
                .map_or(String::new(), |t| format!("{}; ", framed(Section::Teardown, &format!("sh -c {t} 2>&1"))))
        ));
    }
    for r in records.iter().filter(|r| r.when == When::Before) {
        sec(&mut s, Section::Record(&r.name), &format!("sh -c {} 2>&1", shell_quote(&r.command)));
    }
    for o in observers {
        sec(&mut s, Section::Before(o.kind()), o.command());
    }
    sec(&mut s, Section::Uname, "uname -r");
    s.push_str(&format!("{CLOCK_START}=$({CLOCK_READ})\n"));
    s.push_str(&format!(
        "/usr/bin/time -o \"$d/time\" sh -c {} > \"$d/stdout\" 2> \"$d/stderr\"\n",
        shell_quote(&commands.run)
    ));
    s.push_str(&format!("{CLOCK_END}=$({CLOCK_READ})\n"));
    sec(&mut s, Section::Time, "cat \"$d/time\"");
    sec(&mut s, Section::Clock, &format!("echo \"script=${CLOCK_SCRIPT} start=${CLOCK_START} end=${CLOCK_END}\""));
    for o in observers {
        sec(&mut s, Section::After(o.kind()), o.command());
    }
    sec(&mut s, Section::Stdout, &format!("head -c {OUTPUT_KEPT_BYTES} \"$d/stdout\""));
    sec(&mut s, Section::Stderr, &format!("head -c {OUTPUT_KEPT_BYTES} \"$d/stderr\""));
    if let Some(path) = metric_file {
        sec(&mut s, Section::MetricFile, &format!("head -c {METRIC_FILE_KEPT_BYTES} {} 2>&1", shell_quote(path)));
    }
    for r in records.iter().filter(|r| r.when == When::After) {
        sec(&mut s, Section::Record(&r.name), &format!("sh -c {} 2>&1", shell_quote(&r.command)));
    }
    if let Some(t) = &teardown {
        s.push_str(&format!(
            "{} || exit {EXIT_TEARDOWN_FAILED}\n",
            framed(Section::Teardown, &format!("sh -c {t} 2>&1"))
        ));
    }
    s
}

/// How the iteration script reads the guest's clock: nanoseconds since the epoch
/// (`CLOCK_REALTIME`, GNU coreutils' `date`, as every rootfs of `images/` has).
/// `/proc/uptime` is monotonic but has 10 ms resolution, and the rootfs has no tool
/// that prints `CLOCK_MONOTONIC`; the guests run no time daemon, so nothing steps the
/// clock during a step (and a clock that went backwards is reported, see [`Clock`]).
pub const CLOCK_READ: &str = "date +%s%N";

/// Shell variables of the iteration script holding the clock readings.
const CLOCK_SCRIPT: &str = "vmrepro_t0";
const CLOCK_START: &str = "vmrepro_t1";
const CLOCK_END: &str = "vmrepro_t2";

/// The guest clock's readings of one iteration (section `clock`:
/// `script=NS start=NS end=NS`, each [`CLOCK_READ`]'s nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// When the script started.
    pub script_ns: u64,
    /// Right before `run` was started (before GNU time).
    pub start_ns: u64,
    /// Right after `run` (and GNU time) ended.
    pub end_ns: u64,
}

impl Clock {
    /// Parses section `clock`. Errors (in words, quoting the text): a reading is
    /// missing or not a whole number of nanoseconds (a `date` without `%N` prints
    /// `N`), or the clock went backwards.
    pub fn parse(text: &str) -> Result<Clock, String> {
        let value = |key: &str| -> Result<u64, String> {
            let field = text.split_whitespace().find_map(|f| f.strip_prefix(key)?.strip_prefix('='));
            field.and_then(|v| v.parse().ok()).ok_or_else(|| {
                format!("the guest clock's reading {key} in {:?} is not a number of nanoseconds", text.trim())
            })
        };
        let c = Clock { script_ns: value("script")?, start_ns: value("start")?, end_ns: value("end")? };
        if c.start_ns < c.script_ns || c.end_ns < c.start_ns {
            return Err(format!("the guest clock went backwards: {:?}", text.trim()));
        }
        Ok(c)
    }

    /// Seconds from right before `run` to right after it (1 ns resolution; it includes
    /// starting GNU time and `sh`, and one `date`: the same work on every VM of one
    /// rootfs, tens of milliseconds under TCG).
    pub fn elapsed_s(&self) -> f64 {
        (self.end_ns - self.start_ns) as f64 / 1e9
    }

    /// Seconds from the script's start to `run`'s start and end.
    pub fn offsets_s(&self) -> (f64, f64) {
        ((self.start_ns - self.script_ns) as f64 / 1e9, (self.end_ns - self.script_ns) as f64 / 1e9)
    }
}

/// The shell function of the iteration script that prints one section.
const SECTION_FN: &str = "vmrepro_section";

/// What follows a section's name on its marker line: its length in bytes.
const LENGTH_KEY: &str = "bytes=";

/// `cmd`'s stdout kept in a file, then printed as `section` with its length; the
/// line's status is `cmd`'s.
fn framed(section: Section<'_>, cmd: &str) -> String {
    format!("{{ {cmd}; }} > \"$d/sec\"; {SECTION_FN} {}", section.name())
}

/// An iteration's output split into its sections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sections(BTreeMap<String, String>);

impl Sections {
    /// Splits the iteration script's stdout, byte for byte as the guest printed it, at
    /// its marker lines. A marker line that gives the section's length
    /// (`### vmrepro section: time bytes=212`) is followed by exactly that many bytes
    /// of output and a newline, so output without a trailing newline, output that looks
    /// like a marker and binary bytes stay inside their section; a section cut short (a
    /// step that ended early) keeps what there is. A marker line without a length (runs
    /// recorded before lengths were printed) starts a section that runs to the next
    /// marker line. Text outside any section is dropped; a section printed twice keeps
    /// both texts, in order. Each section's text is lossy UTF-8.
    pub fn split_bytes(stdout: &[u8]) -> Sections {
        let mut out: BTreeMap<String, String> = BTreeMap::new();
        let mut current: Option<String> = None;
        let mut pos = 0;
        while pos < stdout.len() {
            let end = stdout[pos..].iter().position(|b| *b == b'\n').map_or(stdout.len(), |i| pos + i);
            let line = &stdout[pos..end];
            let next = (end + 1).min(stdout.len());
            let Some(rest) = line.strip_prefix(SECTION_MARKER.as_bytes()) else {
                if let Some(c) = &current {
                    let s = out.get_mut(c).expect("inserted");
                    s.push_str(&String::from_utf8_lossy(line));
                    s.push('\n');
                }
                pos = next;
                continue;
            };
            let rest = String::from_utf8_lossy(rest);
            let counted = rest
                .trim()
                .split_once(' ')
                .and_then(|(name, len)| Some((name.to_string(), len.strip_prefix(LENGTH_KEY)?.parse::<usize>().ok()?)));
            match counted {
                Some((name, len)) => {
                    let body_end = next.saturating_add(len).min(stdout.len());
                    out.entry(name).or_default().push_str(&String::from_utf8_lossy(&stdout[next..body_end]));
                    current = None;
                    // The newline the script prints after the output.
                    pos = if stdout.get(body_end) == Some(&b'\n') { body_end + 1 } else { body_end };
                }
                None => {
                    let name = rest.trim().to_string();
                    out.entry(name.clone()).or_default();
                    current = Some(name);
                    pos = next;
                }
            }
        }
        Sections(out)
    }

    /// The text of `section` (`None` when the script did not print it).
    pub fn get(&self, section: Section<'_>) -> Option<&str> {
        self.0.get(&section.name()).map(String::as_str)
    }

    /// The text of `section`, empty when it was not printed.
    pub fn text(&self, section: Section<'_>) -> &str {
        self.get(section).unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_names_round_trip_through_the_script() {
        let commands = Commands {
            setup: Some("mount x".into()),
            run: "cat 'f' > /dev/null".into(),
            teardown: Some("umount x".into()),
        };
        let records = [
            Record { name: "mount".into(), command: "grep x /proc/mounts".into(), when: When::Before },
            Record { name: "bytes".into(), command: "wc -c < f".into(), when: When::After },
        ];
        let script = iteration_script(
            "m-1",
            &commands,
            &[Observer::new(ObserverKind::named("netstat")), Observer::new(ObserverKind::named("nfsstat"))],
            &records,
            Some("/tmp/out.json"),
        );
        // Every section the script prints, in order (a failed setup prints `teardown` too).
        let printed: Vec<&str> = script
            .split(&format!("; {SECTION_FN} "))
            .skip(1)
            .filter_map(|rest| rest.split([';', ' ', '\n']).next())
            .collect();
        assert_eq!(
            printed,
            [
                "setup",
                "setup-exit",
                "teardown",
                "mount",
                "before-netstat",
                "before-nfsstat",
                "uname",
                "time",
                "clock",
                "netstat",
                "nfsstat",
                "stdout",
                "stderr",
                "metric-file",
                "bytes",
                "teardown"
            ]
        );
        assert!(script.contains("sh -c 'cat '\\''f'\\'' > /dev/null'"), "{script}");
        let out = format!("junk\n{m}uname\n6.1.0\n{m}time\n0.50 real\n{m}bytes\n100\n", m = SECTION_MARKER);
        let s = Sections::split_bytes(out.as_bytes());
        assert_eq!(s.text(Section::Uname), "6.1.0\n");
        assert_eq!(s.get(Section::Record("bytes")), Some("100\n"));
        assert_eq!(s.get(Section::Stdout), None);
    }

    #[test]
    fn hostile_commands_stay_one_argument() {
        let commands = Commands { setup: None, run: "echo '$(reboot)'; echo \"x\"".into(), teardown: None };
        let script = iteration_script("hostile-1", &commands, &[], &[], None);
        let line = script.lines().find(|l| l.starts_with("/usr/bin/time")).unwrap();
        assert_eq!(line, "/usr/bin/time -o \"$d/time\" sh -c 'echo '\\''$(reboot)'\\''; echo \"x\"' > \"$d/stdout\" 2> \"$d/stderr\"");
    }

    #[test]
    fn the_clock_section_gives_nanoseconds_and_refuses_what_is_not_a_reading() {
        let c = Clock::parse("script=1000000000 start=1500000000 end=1503250000\n").unwrap();
        assert_eq!(c.elapsed_s(), 0.00325);
        assert_eq!(c.offsets_s(), (0.5, 0.50325));
        let err = Clock::parse("script=1N start=1N end=2N").unwrap_err();
        assert!(err.contains("script") && err.contains("1N"), "{err}");
        assert!(Clock::parse("script=1 start=5 end=4").unwrap_err().contains("backwards"));
        assert!(Clock::parse("script=1 start=5").unwrap_err().contains("end"));
    }

    #[test]
    fn the_clock_is_read_right_around_run() {
        let commands = Commands { setup: None, run: "stat /".into(), teardown: None };
        let script = iteration_script("clock-1", &commands, &[], &[], None);
        let lines: Vec<&str> = script.lines().collect();
        let run = lines.iter().position(|l| l.starts_with("/usr/bin/time")).unwrap();
        assert_eq!(lines[run - 1], format!("{CLOCK_START}=$({CLOCK_READ})"));
        assert_eq!(lines[run + 1], format!("{CLOCK_END}=$({CLOCK_READ})"));
    }

    /// `bytes` as a `printf` format that prints exactly them (every byte an octal escape).
    fn printf_of(bytes: &[u8]) -> String {
        let escaped: String = bytes.iter().map(|b| format!("\\{b:03o}")).collect();
        format!("printf '{escaped}'")
    }

    /// Runs an iteration script with `sh` on the host, with GNU time taken out (the
    /// host may lack it; the `time` section is then empty), and returns its stdout.
    fn run_on_host(script: &str) -> Vec<u8> {
        let script = script.replace("/usr/bin/time -o \"$d/time\" ", "").replace(KMSG, "/dev/null");
        let out = std::process::Command::new("sh").arg("-c").arg(&script).output().expect("sh runs");
        assert!(out.status.success(), "{:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
        out.stdout
    }

    #[test]
    fn framing_survives_outputs_without_newline_with_markers_and_binary_bytes() {
        let glued = format!("{SECTION_MARKER}netstat bytes=3\nno newline");
        let outputs: [&[u8]; 3] = [b"a b c", glued.as_bytes(), b"\xff\x00\xfe\n\n"];
        let records: Vec<Record> = outputs
            .iter()
            .enumerate()
            .map(|(i, o)| Record { name: format!("r{i}"), command: printf_of(o), when: When::After })
            .collect();
        let commands = Commands { setup: None, run: printf_of(b"tail with no newline"), teardown: None };
        let out = run_on_host(&iteration_script("framing-1", &commands, &[], &records, None));
        let s = Sections::split_bytes(&out);
        assert_eq!(s.text(Section::Stdout), "tail with no newline");
        for (i, o) in outputs.iter().enumerate() {
            assert_eq!(s.text(Section::Record(&format!("r{i}"))), String::from_utf8_lossy(o), "record r{i}");
        }
        assert_eq!(s.get(Section::After(ObserverKind::named("netstat"))), None, "a marker inside output is output");
    }

    #[test]
    fn a_hung_iterations_output_so_far_is_read_from_its_folder() {
        let step = format!("hung-{}", std::process::id());
        let commands =
            Commands { setup: None, run: "printf 'partial line'; echo oops >&2; sleep 5".into(), teardown: None };
        let script = iteration_script(&step, &commands, &[], &[], None).replace(KMSG, "/dev/null");
        assert!(script.contains(&format!("echo 'vmrepro: iteration {step} begins' 2>/dev/null > /dev/null")));
        let mut hung = std::process::Command::new("sh").arg("-c").arg(&script).spawn().expect("sh runs");
        let dir = std::path::PathBuf::from(iteration_dir(&step));
        let mut got = Sections::default();
        for _ in 0..100 {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let out = run_on_host(&partial_output_script(&step));
            got = Sections::split_bytes(&out);
            if got.text(Section::Stderr) == "oops\n" {
                break;
            }
        }
        let _ = hung.kill();
        let _ = hung.wait();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(got.text(Section::Stdout), "partial line");
        assert_eq!(got.text(Section::Stderr), "oops\n");
    }

    /// Output chunks: any bytes, newlines, and lines that look like section markers
    /// (with and without a length).
    fn output() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let chunk = prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..40),
            Just(b"\n".to_vec()),
            Just(format!("{SECTION_MARKER}stdout").into_bytes()),
            (0usize..50).prop_map(|n| format!("\n{SECTION_MARKER}time bytes={n}\n").into_bytes()),
        ];
        proptest::collection::vec(chunk, 0..6).prop_map(|c| c.concat())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// Every section a command fills (setup, stdout, stderr, the metric file and
        /// records before and after) reads back byte for byte (as lossy UTF-8),
        /// whatever the others print.
        #[test]
        fn every_section_reads_back_as_printed(
            run in output(), err in output(), setup in output(), metric in output(), before in output(), after in output()
        ) {
            let dir = tempfile::tempdir().unwrap();
            let metric_path = dir.path().join("metric.out");
            std::fs::write(&metric_path, &metric).unwrap();
            let records = [
                Record { name: "before".into(), command: printf_of(&before), when: When::Before },
                Record { name: "after".into(), command: printf_of(&after), when: When::After },
            ];
            let commands = Commands {
                setup: Some(printf_of(&setup)),
                run: format!("{}; {} >&2", printf_of(&run), printf_of(&err)),
                teardown: Some("true".into()),
            };
            let script = iteration_script(&format!("prop-{}", std::process::id()), &commands, &[], &records, metric_path.to_str());
            let out = run_on_host(&script);
            let s = Sections::split_bytes(&out);
            proptest::prop_assert_eq!(s.text(Section::Stdout), String::from_utf8_lossy(&run));
            proptest::prop_assert_eq!(s.text(Section::Stderr), String::from_utf8_lossy(&err));
            proptest::prop_assert_eq!(s.text(Section::Setup), String::from_utf8_lossy(&setup));
            proptest::prop_assert_eq!(s.text(Section::MetricFile), String::from_utf8_lossy(&metric));
            proptest::prop_assert_eq!(s.text(Section::Record("before")), String::from_utf8_lossy(&before));
            proptest::prop_assert_eq!(s.text(Section::Record("after")), String::from_utf8_lossy(&after));
            proptest::prop_assert_eq!(s.get(Section::SetupExit), None);
            proptest::prop_assert_eq!(s.get(Section::Teardown), Some(""));
            proptest::prop_assert!(s.get(Section::Uname).is_some_and(|u| !u.trim().is_empty()));
            let clock = Clock::parse(s.text(Section::Clock));
            proptest::prop_assert!(clock.is_ok(), "{:?}: {:?}", s.get(Section::Clock), clock);
        }
    }
}
