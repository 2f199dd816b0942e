//! The overview (`loopx board --all`) over 20 projects of 1,000 todos each: the frame time, the
//! second's recount, the memory of the real overview in tmux, and how long a change in any
//! project takes to show on its screen. Targets of issue 25: frame under 2 ms, memory under
//! 60 MB, a change on screen within 300 ms. Run: `cargo bench --bench overview`.

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use loopx::board::data::Loader;
use loopx::board::overview::render;
use loopx::board::overview::state::{Overview, Row};
use loopx::board::theme::Theme;
use loopx::kernel::Ts;
use loopx::store::FileStore;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const PROJECTS: usize = 20;
const TODOS: usize = 1_000;

fn stamp(now: Ts, ms_ago: i64) -> String {
    Ts(now.0 - ms_ago).to_string()
}

/// One project's files: 1,000 todos (a tenth leased, some monitors), a pending gate in every
/// fourth project, 30 quota spends.
fn write_project(root: &Path, p: usize, now: Ts) {
    let d = root.join(".loopx");
    for sub in ["todos", "gates", "archive", "evidence"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    let created = stamp(now, 86_400_000);
    let config = format!(
        "schema_version = 1\n[goal]\nid = \"p{p}\"\nobjective = \"Project {p}: keep the service fast\"\nstatus = \"active\"\ncreated_at = \"{created}\"\nupdated_at = \"{created}\"\n[quota]\nslots = 60\nwindow = \"1h\"\n"
    );
    std::fs::write(d.join("loopx.toml"), config).unwrap();
    for i in 0..TODOS {
        let mut s = format!(
            "schema_version = 1\nid = \"t-{i:06}\"\ntitle = \"Task {i} of project {p}\"\npriority = \"P{}\"\nstatus = \"open\"\ncreated_by = \"bench\"\ncreated_at = \"{created}\"\nupdated_at = \"{created}\"\n",
            i % 5
        );
        if i % 97 == 5 {
            s.push_str("every = \"10m\"\n");
        }
        if i % 10 == 3 {
            let _ = write!(
                s,
                "fence = 1\n[lease]\nholder = \"agent-{}\"\nfence = 1\nacquired_at = \"{}\"\nexpires_at = \"{}\"\n",
                i % 8,
                stamp(now, 60_000),
                stamp(now, -1_800_000)
            );
        }
        std::fs::write(d.join("todos").join(format!("t-{i:06}.toml")), s).unwrap();
    }
    if p.is_multiple_of(4) {
        write_gate(root, "g-000001", &format!("Release project {p}?"), now);
    }
    let mut q = String::from("schema_version = 1\n");
    for k in 0..30 {
        let _ = write!(
            q,
            "[[spend]]\nat = \"{}\"\nagent = \"agent-{}\"\nslots = 1\n",
            stamp(now, k * 60_000),
            k % 8
        );
    }
    std::fs::write(d.join("quota.toml"), q).unwrap();
}

/// A pending gate, written as another process does (temp file, rename).
fn write_gate(root: &Path, id: &str, question: &str, now: Ts) {
    let text = format!(
        "schema_version = 1\nid = \"{id}\"\nquestion = \"{question}\"\nopened_by = \"agent-1\"\nopened_at = \"{}\"\nstatus = \"pending\"\n",
        stamp(now, 1000)
    );
    let path = root.join(".loopx/gates").join(format!("{id}.toml"));
    let tmp = root
        .join(".loopx/gates")
        .join(format!(".{id}.toml.tmp-bench"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
}

fn median_ms(mut v: Vec<Duration>) -> (f64, f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (
        ms(v[v.len() / 2]),
        ms(v[v.len() * 95 / 100]),
        ms(v[v.len() - 1]),
    )
}

fn main() {
    let now = Ts::now();
    let base: PathBuf =
        std::env::temp_dir().join(format!("loopx-overview-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let roots: Vec<PathBuf> = (0..PROJECTS)
        .map(|p| base.join(format!("p{p:02}")))
        .collect();
    let t0 = Instant::now();
    for (p, r) in roots.iter().enumerate() {
        write_project(r, p, now);
    }
    println!(
        "wrote {PROJECTS} projects of {TODOS} todos in {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    // In process: every project loaded through its store, then frames and the second's recount.
    let t0 = Instant::now();
    let rows = roots
        .iter()
        .enumerate()
        .map(|(p, r)| Row::new(format!("p{p:02}"), r.display().to_string()))
        .collect();
    let mut o = Overview::new(rows, Theme::dark(), false, Ts::now());
    for (i, r) in roots.iter().enumerate() {
        let mut l = Loader::new(Box::new(FileStore::at(r)));
        let d = l.full(Ts::now());
        o.loaded(i, d.full.ok_or("no load").map_err(String::from));
    }
    println!(
        "loaded {PROJECTS} projects in {:.0} ms",
        t0.elapsed().as_secs_f64() * 1000.0
    );
    let mut frame_80 = 0.0;
    for (w, h) in [(80u16, 24u16), (120, 40), (240, 70)] {
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        let mut v = Vec::new();
        for _ in 0..200 {
            let s = Instant::now();
            term.draw(|f| render::draw(f, &o)).unwrap();
            v.push(s.elapsed());
        }
        let (m, p95, max) = median_ms(v);
        if w == 80 {
            frame_80 = m;
        }
        println!("frame {w}x{h}: median {m:.3} ms, p95 {p95:.3} ms, max {max:.3} ms (200 frames)");
    }
    let mut v = Vec::new();
    for _ in 0..20 {
        let s = Instant::now();
        o.tick(Ts::now());
        v.push(s.elapsed());
    }
    let (m, p95, _) = median_ms(v);
    println!("the second's recount of {PROJECTS} summaries: median {m:.2} ms, p95 {p95:.2} ms");
    drop(o);

    match real_overview(&base, &roots, now) {
        Ok((rss, hwm, lat)) => {
            let (m, p95, max) = median_ms(lat.clone());
            println!(
                "`loopx board --all` in tmux 120x40: RSS {:.1} MB, peak {:.1} MB",
                rss as f64 / 1024.0,
                hwm as f64 / 1024.0
            );
            println!(
                "a gate written into one project -> on the overview's screen: median {m:.0} ms, p95 {p95:.0} ms, max {max:.0} ms ({} runs)",
                lat.len()
            );
            println!(
                "target: frame under 2 ms: {frame_80:.3} ms at 80x24: {}",
                if frame_80 < 2.0 { "met" } else { "MISSED" }
            );
            println!(
                "target: memory under 60 MB: {:.1} MB: {}",
                hwm as f64 / 1024.0,
                if hwm < 60 * 1024 { "met" } else { "MISSED" }
            );
            println!(
                "target: a change on screen within 300 ms: max {max:.0} ms: {}",
                if max < 300.0 { "met" } else { "MISSED" }
            );
        }
        Err(e) => println!("the real overview was not measured: {e}"),
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// The release `loopx board --all` over the projects in a 120x40 tmux pane: its memory once every
/// row shows, and the time from a gate written into each of ten projects to its question on screen.
fn real_overview(
    base: &Path,
    roots: &[PathBuf],
    now: Ts,
) -> Result<(u64, u64, Vec<Duration>), String> {
    let cfg = base.join("cfg");
    std::fs::create_dir_all(cfg.join("loopx")).unwrap();
    let mut list = String::from("schema_version = 1\n");
    for (p, r) in roots.iter().enumerate() {
        let _ = write!(
            list,
            "[[project]]\nname = \"p{p:02}\"\npath = \"{}\"\n",
            r.display()
        );
    }
    std::fs::write(cfg.join("loopx/projects.toml"), list).unwrap();
    let socket = format!("loopx-overview-bench-{}", std::process::id());
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .arg("-L")
            .arg(&socket)
            .args(args)
            .output()
            .map_err(|e| format!("tmux: {e}"))
    };
    let screen = || {
        tmux(&["capture-pane", "-p", "-t", "b"])
            .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
    };
    let cmd = format!(
        "exec env XDG_CONFIG_HOME='{}' '{}' board --all",
        cfg.display(),
        env!("CARGO_BIN_EXE_loopx")
    );
    let out = tmux(&[
        "new-session",
        "-d",
        "-s",
        "b",
        "-x",
        "120",
        "-y",
        "40",
        &cmd,
    ])?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let result = (|| {
        let start = Instant::now();
        while !screen()?.contains("Release project 16?") {
            if start.elapsed() > Duration::from_secs(60) {
                return Err(format!(
                    "the overview did not show within 60 s:\n{}",
                    screen()?
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_secs(3));
        let mut lat = Vec::new();
        for k in 0..10 {
            let p = (k * 7 + 3) % roots.len();
            let q = format!("Change {k} in p{p:02}?");
            write_gate(&roots[p], &format!("g-bench{k}"), &q, now);
            let s = Instant::now();
            // The header counts every project's pending gates (the list may be cut).
            let shown = format!("? {} pending gates", PROJECTS.div_ceil(4) + k + 1);
            while !screen()?.contains(&shown) {
                if s.elapsed() > Duration::from_secs(5) {
                    return Err(format!("`{q}` did not show within 5 s"));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            lat.push(s.elapsed());
            std::thread::sleep(Duration::from_millis(300));
        }
        let (rss, hwm) = common::pane_memory(tmux)?;
        Ok((rss, hwm, lat))
    })();
    let _ = tmux(&["kill-server"]);
    result
}
