//! Fast tests (no VM): every suite in `suites/` compiles into a plan, snapshotted as
//! `snapshots/plan__<suite>.snap` with the repository path redacted, and the QEMU
//! command line built for one VM is snapshotted as `snapshots/qemu_args__tcg.snap`.
//! A change in defaults, in the steps a scenario expands into, or in QEMU's
//! arguments shows up here as a reviewable diff.

mod support;

use std::path::PathBuf;

use support::{repo_root as root, snapshot_settings as settings};
use vmrepro::infra::qemu::args::{kernel_cmdline, qemu_args, shell_line, Accelerator, GuestRam, QemuConfig};

#[test]
fn every_suite_compiles_into_its_plan() {
    let catalog = vmrepro::infra::images::Catalog::load(&root().join("images")).expect("images/");
    let mut seen = 0;
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("suites"))
        .expect("suites/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for path in files {
        let file = vmrepro::schema::load_suite(&path).unwrap_or_else(|e| panic!("{e}"));
        let plan = vmrepro::suite::compile(&file, &catalog).unwrap_or_else(|e| panic!("{e}"));
        // Every measured VM gets one iteration step per repeat (and warm-up).
        for m in &plan.measurements {
            for mv in &m.vms {
                let vm = plan.vms.iter().find(|v| v.name == mv.vm).expect("measured VM");
                let steps = vm
                    .steps
                    .iter()
                    .filter(|s| matches!(&s.kind, vmrepro::plan::StepKind::Measure { measurement, .. } if *measurement == m.name))
                    .count();
                assert_eq!(steps as u32, m.repeat + m.warmup, "{}: {} on {}", plan.suite, m.name, mv.vm);
                assert_eq!(m.iterations.iter().filter(|i| i.vm == mv.vm).count(), steps);
            }
        }
        let name = format!("plan__{}", plan.suite);
        settings().bind(|| insta::assert_yaml_snapshot!(name, plan));
        seen += 1;
    }
    assert!(seen >= 2, "suites/ must hold the suites");
}

#[test]
fn qemu_command_line_for_a_tcg_guest() {
    let config = QemuConfig {
        name: "alpha".into(),
        memory_mib: 384,
        cpus: 1,
        accel: Accelerator::Tcg,
        kernel: "/CACHE/kernel/KEY/vmlinuz".into(),
        initrd: "/RUN/alpha/initrd.cpio".into(),
        append: kernel_cmdline(Some("quiet")),
        root_overlay: "/RUN/alpha/root.qcow2".into(),
        modules_disk: Some("/CACHE/kernel/KEY/modules.ext4".into()),
        tap: "tap0".into(),
        mac: vmrepro::infra::net::mac_for("smoke", "alpha"),
        qmp_socket: "/RUN/alpha/qmp.sock".into(),
        qga_socket: "/RUN/alpha/qga.sock".into(),
        console_log: "/RESULTS/vms/alpha/console.log".into(),
        shell_socket: "/RUN/alpha/shell.sock".into(),
        ram: GuestRam::Anonymous,
        incoming: None,
        console_append: false,
        pinned_cpu: None,
        capture: None,
    };
    let args = qemu_args(&config);
    assert!(args.windows(2).any(|w| w[0] == "-accel" && w[1] == "tcg"), "TCG guest: {args:?}");
    assert!(args.contains(&"-nodefaults".to_string()) && args.contains(&"-no-reboot".to_string()));
    assert!(args.iter().any(|a| a.contains("readonly=on")), "the modules disk is read-only");
    let serial: Vec<&String> = args.windows(2).filter(|w| w[0] == "-serial").map(|w| &w[1]).collect();
    assert_eq!(serial, ["chardev:console", "chardev:shell"], "ttyS0 the console log, ttyS1 the shell");
    settings().bind(|| {
        insta::assert_snapshot!("qemu_args__tcg", shell_line("qemu-system-x86_64", &args).replace(" -", "\n  -"))
    });
    assert!(!args.iter().any(|a| a.contains("vmrepro.")), "no per-VM identity on the kernel command line");

    // The same VM started from a saved state: the same arguments, the console log
    // appended to, and `-incoming file:` last.
    let restored = QemuConfig {
        incoming: Some("/CACHE/vmstate/KEY/state".into()),
        console_append: true,
        root_overlay: "/RUN/alpha/root.qcow2".into(),
        ..config.clone()
    };
    let r = qemu_args(&restored);
    assert_eq!(&r[r.len() - 2..], ["-incoming", "file:/CACHE/vmstate/KEY/state"]);
    assert!(r.contains(&"file,id=console,path=/RESULTS/vms/alpha/console.log,append=on".to_string()), "{r:?}");
    let same: Vec<&String> = r[..r.len() - 2].iter().filter(|a| !a.contains("append=on")).collect();
    let fresh: Vec<&String> = args.iter().filter(|a| !a.starts_with("file,id=console")).collect();
    assert_eq!(same, fresh, "a restored VM has the booted VM's devices");

    // Mapped states: the booting VM's RAM is the memfd QEMU has as fd 3, shared; the
    // restored VM maps the state's RAM file privately and loads the rest over QMP.
    let ram_args = |c: &QemuConfig| -> Vec<String> {
        let a = qemu_args(c);
        let i = a.iter().position(|x| x.starts_with("memory-backend-file")).expect("a memory backend");
        a[i - 1..i + 3].to_vec()
    };
    let booting = QemuConfig { ram: GuestRam::Shared, ..config.clone() };
    assert_eq!(
        ram_args(&booting),
        [
            "-object",
            "memory-backend-file,id=ram0,size=384M,mem-path=/proc/self/fd/3,share=on",
            "-machine",
            "memory-backend=ram0"
        ]
    );
    let mapped = QemuConfig { ram: GuestRam::Mapped("/CACHE/vmstate/KEY,1/ram".into()), ..restored.clone() };
    assert_eq!(
        ram_args(&mapped)[1],
        "memory-backend-file,id=ram0,size=384M,mem-path=/CACHE/vmstate/KEY,,1/ram,share=off,readonly=on,rom=off",
        "private, read-only file, writable guest RAM; the comma doubled"
    );
    let m = qemu_args(&mapped);
    assert_eq!(&m[m.len() - 2..], ["-incoming", "defer"], "x-ignore-shared is set over QMP before the load");
    let kvm = qemu_args(&QemuConfig { accel: Accelerator::Kvm, ..booting.clone() });
    assert!(kvm.windows(2).any(|w| w == ["-accel", "kvm"]) && kvm.windows(2).any(|w| w == ["-cpu", "host"]));
    assert!(kvm.iter().any(|a| a.ends_with("mem-path=/proc/self/fd/3,share=on")), "KVM maps the same RAM: {kvm:?}");
}

#[test]
fn each_vm_needs_the_kernel_features_of_its_role() {
    let catalog = vmrepro::infra::images::Catalog::load(&root().join("images")).expect("images/");
    let needs = |suite: &str| -> Vec<(String, Vec<&'static str>)> {
        let file = vmrepro::schema::load_suite(&root().join("suites").join(suite)).unwrap_or_else(|e| panic!("{e}"));
        let plan = vmrepro::suite::compile(&file, &catalog).unwrap_or_else(|e| panic!("{e}"));
        plan.vms
            .iter()
            .map(|v| {
                let options = vmrepro::run::images::role_needs(&plan, v).iter().map(|n| n.option).collect();
                (v.name.clone(), options)
            })
            .collect()
    };
    let owned = |v: &[(&str, &[&'static str])]| -> Vec<(String, Vec<&'static str>)> {
        v.iter().map(|(n, o)| (n.to_string(), o.to_vec())).collect()
    };
    assert_eq!(
        needs("kernel-flavours.yaml"),
        owned(&[
            ("server", &["CONFIG_NFSD"]),
            ("client-standard", &["CONFIG_NFS_FS", "CONFIG_NET_SCH_NETEM"]),
            ("client-cloud", &["CONFIG_NFS_FS"]),
        ])
    );
    // A seeded netem sits under prio with u32 filters; no server: no NFS client needed.
    let tcp = needs("tcp-iperf3-loss.yaml");
    assert!(tcp.iter().all(|(_, o)| !o.contains(&"CONFIG_NFS_FS")), "{tcp:?}");
    assert!(
        tcp.iter().any(|(_, o)| o.contains(&"CONFIG_NET_SCH_PRIO") && o.contains(&"CONFIG_NET_CLS_U32")),
        "{tcp:?}"
    );
    // smoke: no server, no netem: nothing beyond what every guest needs to boot.
    assert!(needs("smoke.yaml").iter().all(|(_, o)| o.is_empty()));
}

/// `repeat: {min, max}` plans `max` rounds, shares α among the looks that can decide,
/// and makes every round of a concurrent measurement wait for the whole previous one.
#[test]
fn adaptive_repeats_plan_max_rounds_and_a_barrier_per_round() {
    let catalog = vmrepro::infra::images::Catalog::load(&root().join("images")).expect("images/");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("adaptive.yaml");
    let suite = "name: adaptive
network: {subnet: 10.80.0.0/24}
vms:
  - {name: alpha, kernel: {debian: \"6.1\"}, address: 10.80.0.10}
  - {name: bravo, kernel: {debian: \"6.12\"}, address: 10.80.0.11}
measure:
  - {name: seq, on: [alpha, bravo], run: 'true', repeat: {min: 3, max: 15}}
  - {name: both, on: [alpha, bravo], run: 'true', repeat: auto, concurrent: true, after: [seq]}
  - {name: fixed, on: [alpha, bravo], run: 'true', repeat: 4, after: [both]}
";
    std::fs::write(&path, suite).expect("written");
    let file = vmrepro::schema::load_suite(&path).unwrap_or_else(|e| panic!("{e}"));
    let plan = vmrepro::suite::compile(&file, &catalog).unwrap_or_else(|e| panic!("{e}"));
    let [seq, both, fixed] = &plan.measurements[..] else { panic!("three measurements") };
    use vmrepro::plan::measurement::Adaptive;
    assert_eq!((seq.adaptive, seq.repeat, seq.verdict.looks), (Some(Adaptive { min: 3, max: 15 }), 15, 9));
    assert_eq!((both.adaptive, both.repeat, both.verdict.looks), (Some(Adaptive { min: 5, max: 15 }), 15, 9));
    assert!((seq.verdict.level() - 0.01 / 9.0).abs() < 1e-12);
    assert_eq!((fixed.adaptive, fixed.repeat, fixed.verdict.looks), (None, 4, 1));
    assert_eq!(seq.iterations.len(), 30);
    let deps = |vm: &str, step: &str| -> Vec<String> {
        let v = plan.vms.iter().find(|v| v.name == vm).expect("VM");
        v.steps.iter().find(|s| s.name == step).expect("step").after.iter().map(|d| d.to_string()).collect()
    };
    // Round 2 of the concurrent one waits for both VMs' round 1; round 1 for neither.
    let r2 = deps("bravo", &both.iterations.iter().find(|i| i.vm == "bravo" && i.number == 2).unwrap().step);
    for vm in ["alpha", "bravo"] {
        let r1 = &both.iterations.iter().find(|i| i.vm == vm && i.number == 1).unwrap().step;
        assert!(r2.iter().any(|d| d.contains(vm) && d.contains(r1.as_str())), "{r2:?} waits for {vm}/{r1}");
    }
    let r1 = deps("bravo", &both.iterations.iter().find(|i| i.vm == "bravo" && i.number == 1).unwrap().step);
    assert!(!r1.iter().any(|d| d.contains(&format!("{}-", both.name))), "{r1:?}");
}

/// `plan --cost` against a cache folder of its own: the 5.10 package is there (an
/// entry of 4 KiB), everything else is not; nothing is fetched or built.
#[test]
fn plan_cost_tells_cached_from_missing_and_builds_nothing() {
    let cache = tempfile::tempdir().unwrap();
    let catalog = vmrepro::infra::images::Catalog::load(&root().join("images")).unwrap();
    let k510 = catalog.kernels.iter().find(|k| k.series == "5.10").expect("5.10 pinned");
    let entry = cache.path().join("debs").join(&k510.sha256);
    std::fs::create_dir_all(&entry).unwrap();
    std::fs::write(entry.join(k510.filename.rsplit('/').next().unwrap()), vec![0u8; 4096]).unwrap();
    let before = support::fingerprint(cache.path());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vmrepro"))
        .args(["plan", "--cost"])
        .arg(root().join("suites/nfs-read-100mb.yaml"))
        .env("VMREPRO_CACHE_DIR", cache.path())
        .env("VMREPRO_QEMU", "/bin/false")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let line_of = |what: &str| text.lines().find(|l| l.contains(what)).unwrap_or_else(|| panic!("{what}:\n{text}"));
    let cached = line_of(&format!("package {} {}", k510.package, k510.version));
    assert!(cached.trim_start().starts_with("cached") && cached.contains("MB, built"), "{text}");
    let k61 = catalog.kernels.iter().find(|k| k.series == "6.1").unwrap();
    let missing = line_of(&format!("package {} {}", k61.package, k61.version));
    assert!(missing.trim_start().starts_with("fetch"), "{text}");
    assert!(missing.contains(&format!("{:.1} MB to download", k61.size as f64 / 1e6)), "{text}");
    assert!(line_of("rootfs bookworm-nfs").trim_start().starts_with("build"), "{text}");
    assert!(text.contains("suite nfs-read-100mb: 11 image(s), 1 cached, 10 to fetch, build or save"), "{text}");
    assert_eq!(support::fingerprint(cache.path()), before, "plan --cost changed the cache");
}

/// A suite with `kernel: {tree, rev}` compiles, against a real git repository mapped with
/// `LoadOptions::trees`, into a tree kernel at the commit the revision names, and a
/// variant axis over `kernel` gives one VM per revision; without the mapping it is
/// refused at `kernel.tree`, and a bundle's pin stands in for the checkout.
#[test]
fn a_kernel_from_a_git_tree_compiles_to_the_commit_its_revision_names() {
    use vmrepro::infra::images::kernel::KernelSource;
    use vmrepro::infra::images::tree::{resolve_rev, Trees};
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("linux");
    std::fs::create_dir(&repo).expect("mkdir");
    let sh = |script: &str| {
        let st = std::process::Command::new("sh").arg("-ec").arg(script).current_dir(&repo).status().expect("sh");
        assert!(st.success(), "{script}");
    };
    sh("git init -q -b master . && git config user.email t@example.org && git config user.name t \
        && echo 1 > Makefile && git add Makefile && git commit -qm 'first' && git tag v1 \
        && echo 2 > Makefile && git commit -qam 'sunrpc: change the timeout' && git tag v2");
    let suite = dir.path().join("tree.yaml");
    std::fs::write(
        &suite,
        "name: tree\nnetwork:\n  subnet: 10.80.0.0/24\nvms:\n  - name: client\n    address: 10.80.0.10\n    kernel: { tree: linux, rev: v1 }\n    variants:\n      kernel: { good: { tree: linux, rev: v1 }, bad: { tree: linux, rev: v2 } }\n",
    )
    .expect("write");
    let catalog = vmrepro::infra::images::Catalog::load(&root().join("images")).expect("images/");
    let mut trees = Trees::default();
    trees.map("linux", repo.clone());
    let options = vmrepro::schema::LoadOptions { trees, ..Default::default() };
    let file = vmrepro::schema::load_suite_with(&suite, &options).expect("loads");
    let plan = vmrepro::suite::compile(&file, &catalog).unwrap_or_else(|e| panic!("{e}"));
    let commits: Vec<(String, String)> = plan
        .vms
        .iter()
        .map(|v| match &v.kernel {
            KernelSource::Tree(t) => (v.name.clone(), t.resolved.commit.clone()),
            other => panic!("{}: {other:?}", v.name),
        })
        .collect();
    let v1 = resolve_rev(&repo, "v1").expect("v1").commit;
    let v2 = resolve_rev(&repo, "v2").expect("v2").commit;
    assert_eq!(commits, vec![("client-good".to_string(), v1.clone()), ("client-bad".to_string(), v2)]);
    // Unmapped: refused where the suite names the tree (here, in the variant).
    let bare = vmrepro::schema::load_suite_with(&suite, &vmrepro::schema::LoadOptions::default()).expect("loads");
    let e = vmrepro::suite::compile(&bare, &catalog).expect_err("unmapped").to_string();
    assert!(e.contains("vms[0].variants.kernel.good") && e.contains("--tree linux=PATH"), "{e}");
    // Pinned (as replay pins from BUNDLE.json): compiles with no checkout.
    let mut pinned = Trees::default();
    for rev in ["v1", "v2"] {
        pinned.pin("linux", rev, resolve_rev(&repo, rev).expect("rev"));
    }
    let file =
        vmrepro::schema::load_suite_with(&suite, &vmrepro::schema::LoadOptions { trees: pinned, ..Default::default() })
            .expect("loads");
    let plan = vmrepro::suite::compile(&file, &catalog).unwrap_or_else(|e| panic!("{e}"));
    let KernelSource::Tree(t) = &plan.vms[0].kernel else { panic!("tree kernel") };
    assert_eq!((t.resolved.commit.as_str(), t.checkout.as_deref()), (v1.as_str(), None));
}

/// `check` refuses an `nfs_read` mount whose NFS version a tree kernel's fragments turn
/// off, as for a source-built kernel. What no fragment says is left alone: it is the
/// default of the tree's own Kconfig at `rev`, which only the build works out.
#[test]
fn a_mount_version_a_tree_kernels_fragment_turns_off_is_refused() {
    use vmrepro::infra::images::tree::Trees;
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("linux");
    std::fs::create_dir(&repo).expect("mkdir");
    let st = std::process::Command::new("sh")
        .arg("-ec")
        .arg("git init -q -b master . && git config user.email t@example.org && git config user.name t && echo 1 > Makefile && git add Makefile && git commit -qm first && git tag v1")
        .current_dir(&repo)
        .status()
        .expect("git");
    assert!(st.success());
    std::fs::write(dir.path().join("no-v4-2.config"), "CONFIG_NFS_V4_1=y\n# CONFIG_NFS_V4_2 is not set\n").unwrap();
    std::fs::write(dir.path().join("v4-2.config"), "CONFIG_NFS_V4_1=y\nCONFIG_NFS_V4_2=y\n").unwrap();
    std::fs::write(dir.path().join("other.config"), "CONFIG_TMPFS=y\n").unwrap();
    let catalog = vmrepro::infra::images::Catalog::load(&root().join("images")).expect("images/");
    let mut trees = Trees::default();
    trees.map("linux", repo);
    let options = vmrepro::schema::LoadOptions { trees, ..Default::default() };
    let compile = |fragments: &str, vers: &str| {
        let suite = dir.path().join("tree-nfs.yaml");
        std::fs::write(
            &suite,
            format!(
                "name: tree-nfs\nnetwork:\n  subnet: 10.80.0.0/24\nvms:\n  - name: server\n    kernel: {{ debian: \"6.1\" }}\n    address: 10.80.0.1\n    profile: {{ name: nfs-server-modern }}\n  - name: client\n    address: 10.80.0.10\n    kernel: {{ tree: linux, rev: v1, fragments: [{fragments}] }}\nnfs_read:\n  server: server\n  export: /srv/export\n  file: {{ name: file.bytes, block_size: 1000000, count: 10 }}\n  clients: [client]\n  mount_options: vers={vers},proto=tcp\n"
            ),
        )
        .expect("write");
        let file = vmrepro::schema::load_suite_with(&suite, &options).expect("loads");
        vmrepro::suite::compile(&file, &catalog).map(|_| ()).map_err(|e| e.to_string())
    };
    let e = compile("v4-2.config, no-v4-2.config", "4.2").expect_err("4.2 turned off by the last fragment");
    assert!(
        e.contains("nfs_read.mount_options")
            && e.contains("ask for NFS version 4.2 on client client, whose kernel from tree linux lacks it: no-v4-2.config turns CONFIG_NFS_V4_2 off"),
        "{e}"
    );
    compile("no-v4-2.config, v4-2.config", "4.2").expect("the last fragment turns 4.2 back on");
    compile("no-v4-2.config", "4.1").expect("4.1 is on");
    compile("other.config", "4.2").expect("no fragment says: the tree's own default, not known before the build");
}
