//! `report.md` and `report.html`: a run folder as a bug report a kernel maintainer can
//! read in a mail and re-run with one command.
//!
//! [`document()`] is a pure function of the run folder's contents (`plan.json`,
//! `run.json`, `results.json` as analysed, `environment.json`, the step outputs):
//! the one-line summary in the kernel's regression style, the environment (host, QEMU,
//! accel, vmrepro and its commit, the suite's SHA-256), each VM's kernel with its
//! package or source hashes, the rootfs and guest package versions, the negotiated NFS
//! mounts, the network conditions, what else than the kernel differs between compared
//! VMs, the comparison in the kernel test robot's layout ([`comparison_table`]) with each
//! verdict, the commands that reproduce it, and the raw output of one repeat per VM.
//! [`write()`] renders it into the run folder (with [`document::markdown`] and
//! [`document::html`]); `vmrepro run`
//! calls it at the end of every run and `vmrepro report RUN_DIR` on any run folder.

pub mod chart;
mod comparison;
pub mod comparison_table;
mod differences;
pub mod document;
pub mod wire;

use std::path::{Path, PathBuf};

use crate::analyse::{analyse_dir, AnalyseError, Analysis};
use crate::measure::analysis::{counted_values, MeasurementResult, OUTCOME_METRIC};
use crate::path_io::Folder;
use crate::run::environment::{self, Environment, KernelOrigin};
use crate::run::record::RunDirError;
use crate::run::StepStatus;
use crate::schema::measure::Better;
use chart::{strip_chart, Series};
use comparison::who;
pub use comparison::{comparison_rows, headline, summary_line, unit_of};
use differences::vm_of;
pub use differences::{environment_differences, net_words, plan_vms, PlanVm};
use document::{Block, Document, Section};

/// Name of the text report in a run folder.
pub const REPORT_MD: &str = "report.md";
/// Name of the page in a run folder.
pub const REPORT_HTML: &str = "report.html";

/// Paths of the written reports.
#[derive(Debug, Clone)]
pub struct Written {
    /// `report.md`.
    pub markdown: PathBuf,
    /// `report.html`.
    pub html: PathBuf,
}

/// Analyses run folder `dir` again and writes its `report.md` and `report.html`.
///
/// Errors: see [`analyse_dir`]; a report can't be written.
pub fn write(dir: &Path) -> Result<Written, AnalyseError> {
    let a = analyse_dir(dir)?;
    write_analysed(&a)
}

/// Writes the reports of an analysed run into its folder.
///
/// Errors: `plan.json` can't be read again, or a report can't be written.
pub fn write_analysed(a: &Analysis) -> Result<Written, AnalyseError> {
    let env = environment::read(&a.dir);
    let vms = plan_vms(&a.dir)?;
    let doc = document(a, env.as_ref(), &vms);
    // Through the confined layer: a link named report.md is replaced, never followed.
    let folder = Folder::open(&a.dir).map_err(RunDirError::from)?;
    folder.write(REPORT_MD, document::markdown(&doc).as_bytes(), 0o644).map_err(RunDirError::from)?;
    folder.write(REPORT_HTML, document::html(&doc).as_bytes(), 0o644).map_err(RunDirError::from)?;
    Ok(Written { markdown: a.dir.join(REPORT_MD), html: a.dir.join(REPORT_HTML) })
}

/// The bundle file name `vmrepro bundle` suggests for run folder `dir` of `suite`:
/// `<suite>-<run folder name>.tar.gz`.
/// Both parts are sanitised ([`file_name_part`]): a crafted `run.json` can't make it a
/// path.
pub fn default_bundle_name(suite: &str, dir: &Path) -> String {
    let stamp = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    format!("{}-{}.tar.gz", file_name_part(suite), file_name_part(&stamp))
}

/// `text` as one safe part of a file name: ASCII letters, digits, `.`, `_` and `-`
/// kept, anything else (`/`, spaces, control characters) replaced by `_`, no leading
/// `.` or `-`, at most 64 characters; `run` when nothing is left.
pub fn file_name_part(text: &str) -> String {
    let mut s: String = text
        .chars()
        .take(64)
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .collect();
    while s.starts_with(['.', '-']) {
        s.remove(0);
    }
    if s.is_empty() {
        "run".into()
    } else {
        s
    }
}

/// The lines of a kernel built here (from a source package or a tree): its base config,
/// fragments and patches with their SHA-256, and the final `.config`'s.
fn build_lines(
    fragments: &[crate::run::environment::FileHash],
    patches: &[crate::run::environment::FileHash],
    config_sha256: Option<&str>,
) -> String {
    let mut t = String::from("  base config: make defconfig + kvm_guest.config\n");
    for f in fragments {
        t.push_str(&format!("  fragment {}\n    sha256 {}\n", f.path, f.sha256));
    }
    for p in patches {
        t.push_str(&format!("  patch {}\n    sha256 {}\n", p.path, p.sha256));
    }
    if let Some(c) = config_sha256 {
        t.push_str(&format!("  final .config sha256 {c}\n"));
    }
    t
}

fn kernel_lines(env: Option<&Environment>, a: &Analysis, vms: &[PlanVm]) -> String {
    let mut t = String::new();
    for v in vms {
        let info = env.and_then(|e| e.kernels.iter().find(|k| k.vm == v.name));
        let release = info
            .map(|k| k.release.clone())
            .filter(|r| !r.is_empty())
            .or_else(|| a.record.vm(&v.name).map(|r| r.kernel_release.clone()))
            .unwrap_or_default();
        t.push_str(&format!("{}: {release}\n", v.name));
        match info.map(|k| &k.origin) {
            Some(KernelOrigin::Debian { package, version, suite, filename, size, sha256 }) => {
                t.push_str(&format!("  package {package} {version} ({suite})\n"));
                t.push_str(&format!("  archive path {filename} ({size} bytes)\n"));
                t.push_str(&format!("  sha256 {sha256}\n"));
            }
            Some(KernelOrigin::Source { package, version, sha256, fragments, patches, config_sha256 }) => {
                t.push_str(&format!("  built from source package {package} {version}\n"));
                t.push_str(&format!("  sha256 {sha256}\n"));
                t.push_str(&build_lines(fragments, patches, config_sha256.as_deref()));
            }
            Some(KernelOrigin::Tree { tree, rev, commit, describe, subject, fragments, patches, config_sha256 }) => {
                t.push_str(&format!("  built from tree {tree} at {rev}: commit {commit} ({describe})\n"));
                t.push_str(&format!("  subject: {subject}\n"));
                t.push_str(&build_lines(fragments, patches, config_sha256.as_deref()));
            }
            Some(KernelOrigin::Local { image, modules }) => {
                t.push_str(&format!("  local image {}\n  sha256 {}\n", image.path, image.sha256));
                if let Some(m) = modules {
                    t.push_str(&format!("  modules {m}\n"));
                }
            }
            None => t.push_str(&format!("  {} (environment.json not recorded)\n", v.kernel)),
        }
    }
    t
}

/// The report of an analysed run: `env` from `environment.json` (absent for runs of
/// vmrepro before it), `vms` from `plan.json`.
pub fn document(a: &Analysis, env: Option<&Environment>, vms: &[PlanVm]) -> Document {
    let sections = [
        Some(summary_section(a, env, vms)),
        Some(environment_section(a, env, vms)),
        Some(kernels_section(a, env, vms)),
        Some(userspace_section(a, env, vms)),
        preset_section(a, env, vms),
        Some(network_section(a, env, vms)),
        Some(differences_section(a, env, vms)),
        Some(comparison_section(a, env, vms)),
    ];
    let after = [
        Some(problems_section(a, env, vms)),
        Some(reproduce_section(a, env, vms)),
        Some(appendix_section(a, env, vms)),
    ];
    Document {
        title: headline(&a.results.suite, &a.results.measurements),
        sections: sections
            .into_iter()
            .flatten()
            .chain(wire::wire_sections(a))
            .chain(after.into_iter().flatten())
            .collect(),
    }
}

/// Summary: one line per candidate, the run and the verdict rule.
fn summary_section(a: &Analysis, _env: Option<&Environment>, _vms: &[PlanVm]) -> Section {
    let r = &a.results;
    let rec = &a.record;
    let mut s = Section::new("Summary");
    let mut lines = Vec::new();
    for m in &r.measurements {
        for c in m.vms.iter().filter(|v| !m.is_baseline(&v.vm)) {
            let Some(base) = m.vm(m.baseline_of(&c.vm)) else { continue };
            lines.push(summary_line(m, base, c));
        }
    }
    if lines.is_empty() {
        lines.push("The suite has no measurement: see the steps below.".into());
    }
    s.push(Block::Items(lines));
    let repeats = r.measurements.first().and_then(|m| m.vms.first()).map_or(0, |v| v.iterations.len());
    // The word the exit status says: a run whose steps passed fails on its problems.
    let status = match (rec.status, r.problems().len()) {
        (crate::run::RunStatus::Passed, n) if n > 0 => format!("failed ({n} problem{})", if n == 1 { "" } else { "s" }),
        (other, _) => status_word(other),
    };
    let mut about = format!("Suite {}: run {status}, started {}", rec.suite, rec.started);
    if repeats > 0 {
        about.push_str(&format!(", {repeats} repeat(s) per VM"));
    }
    about.push('.');
    let mut rules: Vec<String> = a
        .plan
        .measurements
        .iter()
        .map(|m| if m.metric.name == OUTCOME_METRIC { OUTCOME_RULE.to_string() } else { rule_words(&m.verdict) })
        .collect();
    rules.dedup();
    for rule in rules {
        about.push(' ');
        about.push_str(&rule);
    }
    s.push(Block::Para(about));
    s
}

/// The verdict rule of a `compare: outcome` measurement in one sentence.
const OUTCOME_RULE: &str = "Verdict rule (compare: outcome): a VM has the same outcome when the way its repeats ended (exit statuses, signals, timeouts, setup failures), counted, is its baseline's, else a different outcome; times are not compared.";

/// The verdict rule of a measurement in one sentence.
fn rule_words(p: &crate::plan::measurement::VerdictPolicy) -> String {
    let floor = crate::report::text::pct(p.floor);
    match p.rule {
        crate::plan::measurement::Rule::Ranges => format!("Verdict rule (0-day/mmtests practice): a change is flagged only when the medians differ by more than {floor} and the ranges of the repeats do not overlap."),
        crate::plan::measurement::Rule::MannWhitney => format!("Verdict rule: exact Mann–Whitney test; slower/faster when p < {} and the Hodges–Lehmann ratio is beyond {floor}, same when its {} interval lies within ±{floor}, undecided otherwise.", crate::report::text::alpha_words(p), crate::report::text::pct(1.0 - p.level())),
    }
}

/// Environment: host, QEMU, accel, vmrepro, the suite.
fn environment_section(a: &Analysis, env: Option<&Environment>, _vms: &[PlanVm]) -> Section {
    let rec = &a.record;
    let mut s = Section::new("Environment");
    let mut f = Vec::new();
    match env {
        Some(e) => {
            f.push(("host kernel".into(), e.host.kernel.clone()));
            f.push(("CPU".into(), format!("{} ({} CPUs usable)", e.host.cpu_model, e.host.cpus)));
            f.push(("QEMU".into(), e.host.qemu_version.clone()));
        }
        None => f.push(("host".into(), "not recorded (run made before environment.json)".into())),
    }
    let accel = rec.accel.map_or("-".to_string(), |x| format!("{x:?}").to_lowercase());
    f.push(("accel".into(), accel));
    if rec.pinned() {
        let each: Vec<String> = rec
            .vms
            .iter()
            .map(|v| format!("{} {}", v.name, v.pinned_cpu.map_or("unpinned".to_string(), |c| format!("CPU {c}"))))
            .collect();
        f.push(("QEMU pinned (--pin)".into(), each.join(", ")));
    } else if let Some(why) = &rec.pin_notice {
        f.push(("QEMU pinned (--pin)".into(), format!("asked for, not applied: {why}")));
    }
    if let Some(e) = env {
        f.push(("vmrepro".into(), format!("{} (built from git commit {})", e.vmrepro.version, e.vmrepro.git_commit)));
        let path = e.suite.relative_path.clone().unwrap_or_else(|| rec.suite_file.clone());
        f.push(("suite file".into(), path));
        f.push(("suite sha256".into(), e.suite.sha256.clone()));
        if let Some(c) = &e.suite.project_commit {
            f.push(("suite from commit".into(), c.clone()));
        }
    }
    s.push(Block::Fields(f));
    if let Some(n) = &rec.accel_notice {
        s.push(Block::Para(n.trim_start_matches("notice: ").to_string()));
    }
    for v in &rec.vms {
        if let Some(why) = v.capture.as_ref().and_then(|c| c.stopped.as_ref()) {
            s.push(Block::Para(format!("The packet capture of {} {why}.", v.name)));
        }
    }
    for n in env.map(|e| e.notes.as_slice()).unwrap_or_default() {
        s.push(Block::Para(format!("Not recorded: {n}")));
    }
    s
}

/// Kernels: each VM's kernel and its hashes.
fn kernels_section(a: &Analysis, env: Option<&Environment>, vms: &[PlanVm]) -> Section {
    let mut s = Section::new("Kernels");
    s.push(Block::Table(kernel_lines(env, a, vms)));
    s
}

/// Guest userspace: the rootfs and the guest package versions.
fn userspace_section(_a: &Analysis, env: Option<&Environment>, vms: &[PlanVm]) -> Section {
    let mut s = Section::new("Guest userspace");
    match env {
        Some(e) if !e.rootfs.is_empty() => {
            for rf in &e.rootfs {
                let users: Vec<&str> =
                    vms.iter().filter(|v| v.rootfs_id() == rf.name).map(|v| v.name.as_str()).collect();
                let mut t = format!("rootfs {} (used by {})\n", rf.name, users.join(", "));
                let recipe = if rf.recipe.is_empty() { &rf.name } else { &rf.recipe };
                t.push_str(&format!("  recipe images/rootfs/{recipe}.yaml sha256 {}\n", rf.recipe_sha256));
                if !rf.extra_packages.is_empty() {
                    t.push_str(&format!("  extra packages {}\n", rf.extra_packages.join(", ")));
                }
                t.push_str(&format!("  cache key (recipe, overlay, init) {}\n", rf.cache_key));
                if rf.packages.is_empty() {
                    t.push_str("  package versions: not recorded\n");
                }
                for (p, v) in &rf.packages {
                    t.push_str(&format!("  {p:<18} {v}\n"));
                }
                s.push(Block::Table(t));
            }
            s.push(Block::Para(format!(
                "Package versions were read from {}.",
                e.rootfs.first().map_or("", |r| r.packages_source.as_str())
            )));
        }
        _ => {
            s.push(Block::Para("Not recorded (run made before environment.json).".into()));
        }
    }
    s
}

/// The preset's own facts (suites with one, e.g. the NFS mounts).
fn preset_section(a: &Analysis, _env: Option<&Environment>, _vms: &[PlanVm]) -> Option<Section> {
    let p = a.preset()?.section();
    let mut s = Section::new(&p.title);
    s.push(Block::Table(p.table));
    for para in p.paragraphs {
        s.push(Block::Para(para));
    }
    Some(s)
}

/// Network conditions applied in the guests.
fn network_section(a: &Analysis, _env: Option<&Environment>, vms: &[PlanVm]) -> Section {
    let rec = &a.record;
    let mut s = Section::new("Network conditions");
    let applied: Vec<String> =
        vms.iter().filter_map(|v| v.net.as_ref().map(|n| format!("{}: {}", v.name, net_words(n)))).collect();
    if applied.is_empty() {
        s.push(Block::Para(format!(
            "None: every NIC ran with the kernel's defaults on the run's private bridge (subnet {}, MTU {}).",
            rec.subnet, rec.mtu
        )));
    } else {
        s.push(Block::Items(applied));
        s.push(Block::Para(format!(
            "Applied inside the guests with tc/ethtool before any step, on the run's private bridge (subnet {}, MTU {}).",
            rec.subnet, rec.mtu
        )));
    }
    s
}

/// What differs between compared VMs besides the kernel.
fn differences_section(a: &Analysis, _env: Option<&Environment>, vms: &[PlanVm]) -> Section {
    let r = &a.results;
    let mut s = Section::new("Environment differences");
    let mut items = Vec::new();
    for m in &r.measurements {
        for c in m.vms.iter().filter(|v| !m.is_baseline(&v.vm)) {
            let baseline = m.baseline_of(&c.vm);
            let d = environment_differences(a, vms, baseline, &c.vm);
            let same_kernel = vm_of(vms, baseline).map(|v| &v.kernel) == vm_of(vms, &c.vm).map(|v| &v.kernel);
            if d.is_empty() {
                items.push(if same_kernel {
                    format!("{} vs {}: same kernel and same settings; only their name, address and MAC differ (an A/A comparison: any difference is noise).", c.vm, baseline)
                } else {
                    format!("{} vs {}: they differ only in their kernel.", c.vm, baseline)
                });
            } else {
                let k = if same_kernel { "same kernel; they differ in" } else { "they differ in the kernel, and in" };
                items.push(format!("{} vs {}: {k} these: {}.", c.vm, baseline, d.join("; ")));
            }
        }
    }
    if items.is_empty() {
        items.push("No comparison in this suite.".into());
    }
    s.push(Block::Items(items));
    s
}

/// The comparison tables, verdicts and charts.
fn comparison_section(a: &Analysis, _env: Option<&Environment>, _vms: &[PlanVm]) -> Section {
    let r = &a.results;
    let mut s = Section::new("Comparison");
    for m in &r.measurements {
        if m.metric == OUTCOME_METRIC {
            outcome_comparison(&mut s, m);
            continue;
        }
        let better = match m.better {
            Better::Lower => "lower is better",
            Better::Higher => "higher is better",
        };
        let n = m.vms.first().map_or(0, |v| v.iterations.iter().filter(|i| i.counted).count());
        s.push(Block::Para(format!(
            "Measurement {}: metric {}{} ({better}), {n} counted repeat(s) per VM, {}. value = median of the repeats, %stddev = standard deviation / mean, %change = candidate vs baseline; counters are deltas over the measured command.",
            m.name,
            m.metric,
            m.unit.as_ref().map_or(String::new(), |u| format!(" in {u}, a number the measured command printed")),
            m.baseline_words()
        )));
        if !m.rounds.is_empty() {
            s.push(Block::Para(
                "The VMs ran each round together (a barrier between rounds); how much of each round their measured commands overlapped:".into(),
            ));
            s.push(Block::Items(m.rounds.iter().map(ToString::to_string).collect()));
        }
        for c in m.vms.iter().filter(|v| !m.is_baseline(&v.vm)) {
            let Some(base) = m.vm(m.baseline_of(&c.vm)) else { continue };
            let mut t = format!("baseline:  {}\ncandidate: {}\n\n", who(base), who(c));
            t.push_str(&comparison_table::table(&base.vm, &c.vm, &comparison_rows(m, base, c)));
            t.push_str(&format!(
                "\nverdict ({}): {}\n",
                m.metric,
                c.verdict.clone().unwrap_or_else(|| "not compared".into())
            ));
            s.push(Block::Table(t));
        }
        let series: Vec<Series> = m
            .vms
            .iter()
            .map(|v| Series {
                vm: v.vm.clone(),
                release: v.kernel_release.clone(),
                values: counted_values(&m.metric, v),
                median: v.metric.as_ref().map(|s| s.median),
                baseline: m.is_baseline(&v.vm),
                verdict: v.verdict.clone().unwrap_or_else(|| "-".into()),
                interval: interval_values(m, v),
            })
            .collect();
        s.push(Block::Chart(strip_chart(
            &format!("{}: {}", m.name, m.metric),
            m.unit.as_deref().unwrap_or(unit_of(&m.metric)),
            &series,
        )));
        let mut lines: Vec<String> = crate::report::text::verdict_lines(m).lines().map(str::to_string).collect();
        lines.extend(crate::report::hints::count_hints(m));
        if !lines.is_empty() {
            s.push(Block::Items(lines));
        }
    }
    if r.measurements.is_empty() {
        s.push(Block::Para("The suite has no measurement.".into()));
    }
    s
}

/// The comparison of a `compare: outcome` measurement: per VM how its repeats ended
/// and its verdict against its baseline, no medians.
fn outcome_comparison(s: &mut Section, m: &MeasurementResult) {
    let n = m.vms.first().map_or(0, |v| v.outcomes.len());
    s.push(Block::Para(format!(
        "Measurement {}: compares outcomes (how each repeat ended: exit status, signal, timeout, setup failure), {n} repeat(s) per VM, {}. {OUTCOME_RULE}",
        m.name,
        m.baseline_words()
    )));
    let width = m.vms.iter().map(|v| who(v).chars().count()).max().unwrap_or(0).max("kernel (vm)".len());
    let mut t = format!("{:<width$}  {:<18}  outcomes\n", "kernel (vm)", "verdict");
    for v in &m.vms {
        let verdict = if m.is_baseline(&v.vm) { "baseline".into() } else { v.verdict.clone().unwrap_or("-".into()) };
        t.push_str(&format!("{:<width$}  {verdict:<18}  {}\n", who(v), v.outcome_words()));
    }
    s.push(Block::Table(t));
}

/// Steps that did not pass and problems.
fn problems_section(a: &Analysis, _env: Option<&Environment>, _vms: &[PlanVm]) -> Section {
    let r = &a.results;
    let rec = &a.record;
    let mut problems: Vec<String> = r.problems();
    for v in &rec.vms {
        for st in v.steps.iter().filter(|s| s.status != StepStatus::Passed) {
            let why = st.error.as_ref().map(|e| format!(": {e}")).unwrap_or_default();
            problems.push(format!("step {}/{} {}{why}", v.name, st.name, st.status));
        }
    }
    if let Some(e) = &rec.error {
        problems.push(format!("run: {e}"));
    }
    let steps: usize = rec.vms.iter().map(|v| v.steps.len()).sum();
    let mut s = Section::new("Steps and problems");
    if problems.is_empty() {
        s.push(Block::Para(format!("All {steps} steps of {} VMs passed; no check failed.", rec.vms.len())));
    } else {
        s.push(Block::Items(problems));
    }
    s
}

/// The commands that reproduce the run.
fn reproduce_section(a: &Analysis, env: Option<&Environment>, _vms: &[PlanVm]) -> Section {
    let rec = &a.record;
    let mut s = Section::new("Reproduce");
    let suite_path =
        env.and_then(|e| e.suite.relative_path.clone()).unwrap_or_else(|| format!("suites/{}.yaml", rec.suite));
    let bundle = default_bundle_name(&rec.suite, &a.dir);
    // The commit the suite and images came from; else the one vmrepro was built from.
    let commit = env
        .map(|e| e.suite.project_commit.clone().unwrap_or_else(|| e.vmrepro.git_commit.clone()))
        .unwrap_or_else(|| "unknown".to_string());
    s.push(Block::Para(format!(
        "With vmrepro at git commit {commit} (a checkout of that commit; Debian 12 host, QEMU from bookworm-backports, see the README):"
    )));
    // A pinned run is reproduced pinned: its times are only comparable so.
    let pin = if rec.pinned() { " --pin" } else { "" };
    s.push(Block::Table(format!(
        ".ci/install-deps\ncargo build --release\ntarget/release/vmrepro run{pin} {suite_path}\n"
    )));
    s.push(Block::Para(
        "From the bundle attached to this report (the suite and every file it uses, the pinned image entries, the raw outputs; replay checks the packages' SHA-256, re-runs the suite and prints then against now per VM):"
            .into(),
    ));
    s.push(Block::Table(format!("vmrepro replay{pin} {bundle}\nnix run .#reproduce --{pin} {bundle}\n")));
    s
}

/// The raw output of one repeat per VM.
fn appendix_section(a: &Analysis, _env: Option<&Environment>, _vms: &[PlanVm]) -> Section {
    let r = &a.results;
    let rec = &a.record;
    let mut s = Section::new("Appendix: raw outputs of one repeat per VM");
    for m in &r.measurements {
        for v in &m.vms {
            let Some(it) = v.iterations.iter().find(|i| i.counted).or(v.iterations.first()) else { continue };
            let preset = a.preset().and_then(|p| p.raw_output(&a.dir, m, &v.vm, it.iteration));
            let (caption, text) = if let Some(raw) = preset {
                (raw.caption, raw.text)
            } else {
                let step = rec.vm(&v.vm).and_then(|x| x.step(&it.step));
                let rel = step.and_then(|s| s.stdout.clone()).unwrap_or_default();
                (
                    format!("{}, {} repeat {} ({rel})", v.vm, m.name, it.iteration),
                    step.map(|s| s.stdout_text(&a.dir).unwrap_or_else(|e| format!("(not read: {e})")))
                        .unwrap_or_default(),
                )
            };
            s.push(Block::Raw { caption, text });
        }
    }
    if s.blocks.is_empty() {
        for v in &rec.vms {
            for st in v.steps.iter().filter(|s| s.stdout.is_some()) {
                // Named, never silently dropped: a link or pipe there says so.
                let text = st.stdout_text(&a.dir).unwrap_or_else(|e| format!("(not read: {e})"));
                s.push(Block::Raw {
                    caption: format!("{}/{} ({})", v.name, st.name, st.stdout.as_deref().unwrap_or("")),
                    text,
                });
            }
        }
    }
    s
}

fn status_word(s: crate::run::RunStatus) -> String {
    serde_json::to_value(s).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// `v`'s interval of the ratio to its baseline (the Mann–Whitney test's, of the
/// oriented values: candidate ÷ baseline of times, baseline ÷ candidate of rates) as
/// values of the metric: the baseline's median times the ratio's ends, or divided by
/// them when higher is better; with its words for the chart's hover text. `None` for a
/// baseline, without a comparison, or when the repeats were too few for an interval.
fn interval_values(m: &MeasurementResult, v: &crate::measure::analysis::VmResult) -> Option<(f64, f64, String)> {
    let test = v.comparison.as_ref()?.test.as_ref()?;
    let [lo, hi] = test.interval?;
    let base = m.vm(m.baseline_of(&v.vm))?.metric.as_ref()?.median;
    let (a, b) = match m.better {
        Better::Lower => (base * lo, base * hi),
        Better::Higher => (base / hi, base / lo),
    };
    let words = format!("{} interval of the ratio {lo:.2}x–{hi:.2}x", crate::report::text::pct(test.confidence));
    Some((a.min(b), a.max(b), words))
}
