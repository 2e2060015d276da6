//! JUnit XML for CI systems (`vmrepro run --junit FILE`), written with `quick-junit`
//! (nextest's library).
//!
//! - Test suite `<suite>.steps`: one test case per step, named `vm/step`. Passed →
//!   success; skipped (an earlier step or a dependency did not pass) → skipped, with
//!   the reason; failed, timed out, error, cancelled → failure, with the exit status or
//!   the error. The step's wall time is the case's time.
//! - Test suite `<suite>.verdicts`: one test case per measurement and measured VM,
//!   named `measurement/vm`. It fails when a check failed or an output could not be
//!   read for that VM (the measurement's problems), or when the VM has no value to
//!   compare. The verdict itself (`same`, `slower (1.1x–1.3x)`, …) is **not** a failure:
//!   it is what was measured, reported as the properties `verdict`, `median`,
//!   `ratio_to_baseline`, `p_value` and `ratio_interval` (Mann–Whitney, candidate ÷
//!   baseline), `min_detectable_change` (a fraction) and in `system-out`; whether a
//!   verdict is the expected one is the suite's snapshot test's job
//!   (`cargo test --test suites`).

use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use crate::analyse::Results;
use crate::run::{RunRecord, StepStatus};

/// The JUnit XML of a run (`results`: its analysis, when there is one).
pub fn junit(record: &RunRecord, results: Option<&Results>) -> String {
    let mut report = Report::new(format!("vmrepro {}", record.suite));
    let mut steps = TestSuite::new(format!("{}.steps", record.suite));
    for v in &record.vms {
        for s in &v.steps {
            let name = format!("{}/{}", v.name, s.name);
            let status = match s.status {
                StepStatus::Passed => TestCaseStatus::success(),
                StepStatus::Skipped => {
                    let mut st = TestCaseStatus::skipped();
                    if let Some(e) = &s.error {
                        st.set_message(e.clone());
                    }
                    st
                }
                other => {
                    let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    let msg = match (&s.error, s.exit_code) {
                        (Some(e), _) => e.clone(),
                        (None, Some(c)) => format!("exited {c}, expected {}", s.expect_exit),
                        (None, None) => format!("{other}"),
                    };
                    st.set_message(msg).set_type(other.to_string());
                    st
                }
            };
            let mut tc = TestCase::new(name, status);
            tc.set_classname(format!("{}.{}", record.suite, v.name));
            tc.set_time(Duration::from_secs_f64(s.duration_s.max(0.0)));
            if let Some(out) = &s.stdout {
                tc.add_property(Property::new("stdout", out.clone()));
            }
            steps.add_test_case(tc);
        }
    }
    report.add_test_suite(steps);
    if let Some(r) = results {
        let mut verdicts = TestSuite::new(format!("{}.verdicts", record.suite));
        for m in &r.measurements {
            for v in &m.vms {
                let prefix = format!("{}: ", v.vm);
                let problems: Vec<&String> = m.problems.iter().filter(|p| p.starts_with(&prefix)).collect();
                let status = if !problems.is_empty() {
                    let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    st.set_message(problems.iter().map(|p| p.as_str()).collect::<Vec<_>>().join("; "))
                        .set_type("problem");
                    st
                } else if v.metric.is_none() {
                    let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    st.set_message(format!("no value of {} to compare", m.metric)).set_type("no-value");
                    st
                } else {
                    TestCaseStatus::success()
                };
                let mut tc = TestCase::new(format!("{}/{}", m.name, v.vm), status);
                tc.set_classname(format!("{}.{}", record.suite, m.name));
                let verdict =
                    if m.is_baseline(&v.vm) { "baseline".to_string() } else { v.verdict.clone().unwrap_or("-".into()) };
                tc.add_property(Property::new("verdict", verdict.clone()));
                tc.add_property(Property::new("kernel_release", v.kernel_release.clone()));
                if let Some(s) = &v.metric {
                    tc.add_property(Property::new("median", s.median.to_string()));
                }
                if let Some(x) = v.ratio_to_baseline {
                    tc.add_property(Property::new("ratio_to_baseline", format!("{x:.4}")));
                }
                if let Some(t) = v.comparison.as_ref().and_then(|c| c.test.as_ref()) {
                    tc.add_property(Property::new("p_value", format!("{:.4}", t.p_value)));
                    if let Some([lo, hi]) = t.interval {
                        tc.add_property(Property::new("ratio_interval", format!("{lo:.4}-{hi:.4}")));
                    }
                }
                if let Some(crate::measure::verdict::Detectable::Change { change, .. }) =
                    v.comparison.as_ref().and_then(|c| c.detectable)
                {
                    tc.add_property(Property::new("min_detectable_change", format!("{change:.4}")));
                }
                tc.set_system_out(format!(
                    "{} on {} ({}): median {} {}, verdict {verdict}\n",
                    m.name,
                    v.vm,
                    v.kernel_release,
                    v.metric.as_ref().map_or("-".into(), |s| s.median.to_string()),
                    m.metric
                ));
                verdicts.add_test_case(tc);
            }
        }
        report.add_test_suite(verdicts);
    }
    report.to_string().unwrap_or_default()
}
