//! The guest script of one measured iteration, and reading its output back.
//!
//! The script prints every output it collects as a **section**: a marker line
//! ([`SECTION_MARKER`] + the section's name) followed by the output. [`Section`] is the
//! one definition of the section names: [`iteration_script`] writes them and
//! [`Sections::get`] reads them, so a misspelt section is a compile error, not an empty
//! text at run time.
//!
//! One iteration, in order (every command runs with `/bin/sh -c` in the guest):
//!
//! 1. `setup` (section `setup`, stdout and stderr); if it fails: its exit status
//!    (section `setup-exit`), `teardown`, exit 10;
//! 2. the records with `when: before` (section `<name>`, stdout and stderr);
//! 3. every observer (section `before-<observer>`), then `uname -r` (`uname`);
//! 4. `run`, timed by GNU time (`/usr/bin/time -o`): its report in `time`, the command's
//!    stdout and stderr (first 64 KiB each) in `stdout` and `stderr`;
//! 5. every observer again (section `<observer>`), the file of `metric: {from: {file:
//!    PATH}}` (section `metric-file`, its first [`METRIC_FILE_KEPT_BYTES`]), then the
//!    records with `when: after`;
//! 6. `teardown` (section `teardown`); if it fails: exit 12.
//!
//! The run command's own exit status does not fail the step: GNU time reports it
//! ("Command exited with non-zero status N") and the analysis compares it with the
//! measurement's `expect_exit`. Exit 9: the guest could not make a temp folder.

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
    &["setup", "uname", "time", "stdout", "stderr", "teardown", "setup-exit", "metric-file"];

impl Section<'_> {
    /// The section's name in the script's output: `setup`, `before-netstat`, `netstat`, …
    pub fn name(&self) -> String {
        match self {
            Section::Setup => "setup".into(),
            Section::Uname => "uname".into(),
            Section::Time => "time".into(),
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

/// The guest script of one iteration (see the module docs); `metric_file`: the file
/// the measurement's metric is read from, if it is a file.
pub fn iteration_script(
    commands: &Commands,
    observers: &[Observer],
    records: &[Record],
    metric_file: Option<&str>,
) -> String {
    let mut s = String::new();
    let sec = |s: &mut String, section: Section<'_>, cmd: &str| {
        s.push_str(&format!("sec {}; {cmd}\n", section.name()));
    };
    s.push_str(&format!("sec() {{ echo \"{SECTION_MARKER}$1\"; }}\n"));
    s.push_str(&format!("d=$(mktemp -d) || exit {EXIT_NO_TEMP}\n"));
    s.push_str("trap 'rm -rf \"$d\"' EXIT\n");
    let teardown = commands.teardown.as_deref().map(shell_quote);
    if let Some(setup) = &commands.setup {
        s.push_str(&format!(
            "sec {}; sh -c {} 2>&1 || {{ s=$?; sec {}; echo $s; {}exit {EXIT_SETUP_FAILED}; }}\n",
            Section::Setup.name(),
            shell_quote(setup),
            Section::SetupExit.name(),
            teardown.as_ref().map_or(String::new(), |t| format!("sec {}; sh -c {t} 2>&1; ", Section::Teardown.name()))
        ));
    }
    for r in records.iter().filter(|r| r.when == When::Before) {
        sec(&mut s, Section::Record(&r.name), &format!("sh -c {} 2>&1", shell_quote(&r.command)));
    }
    for o in observers {
        sec(&mut s, Section::Before(o.kind()), o.command());
    }
    sec(&mut s, Section::Uname, "uname -r");
    s.push_str(&format!(
        "/usr/bin/time -o \"$d/time\" sh -c {} > \"$d/stdout\" 2> \"$d/stderr\"\n",
        shell_quote(&commands.run)
    ));
    sec(&mut s, Section::Time, "cat \"$d/time\"");
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
        s.push_str(&format!("sec {}; sh -c {t} 2>&1 || exit {EXIT_TEARDOWN_FAILED}\n", Section::Teardown.name()));
    }
    s
}

/// An iteration's output split into its sections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sections(BTreeMap<String, String>);

impl Sections {
    /// Splits the iteration script's stdout at its marker lines; text before the first
    /// marker is dropped. A section printed twice keeps both texts, in order.
    pub fn split(stdout: &str) -> Sections {
        let mut out: BTreeMap<String, String> = BTreeMap::new();
        let mut current: Option<String> = None;
        for line in stdout.lines() {
            if let Some(name) = line.strip_prefix(SECTION_MARKER) {
                let name = name.trim().to_string();
                out.entry(name.clone()).or_default();
                current = Some(name);
            } else if let Some(c) = &current {
                let s = out.get_mut(c).expect("inserted");
                s.push_str(line);
                s.push('\n');
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
        let script =
            iteration_script(&commands, &[Observer::Netstat, Observer::Nfsstat], &records, Some("/tmp/out.json"));
        // Every section the script prints, in order (a failed setup prints `teardown` too).
        let printed: Vec<&str> = script
            .split("sec ")
            .skip(1)
            .filter_map(|rest| rest.split_once(';').map(|(name, _)| name))
            .filter(|name| !name.contains(' '))
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
        let s = Sections::split(&out);
        assert_eq!(s.text(Section::Uname), "6.1.0\n");
        assert_eq!(s.get(Section::Record("bytes")), Some("100\n"));
        assert_eq!(s.get(Section::Stdout), None);
    }

    #[test]
    fn hostile_commands_stay_one_argument() {
        let commands = Commands { setup: None, run: "echo '$(reboot)'; echo \"x\"".into(), teardown: None };
        let script = iteration_script(&commands, &[], &[], None);
        let line = script.lines().find(|l| l.starts_with("/usr/bin/time")).unwrap();
        assert_eq!(line, "/usr/bin/time -o \"$d/time\" sh -c 'echo '\\''$(reboot)'\\''; echo \"x\"' > \"$d/stdout\" 2> \"$d/stderr\"");
    }
}
