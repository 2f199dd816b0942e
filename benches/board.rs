//! Board speed figures: 10,000 todos and 100,000 evidence entries on disk; full load, reload after a
//! single-file change, file event latency, frame time and memory, and the targets of issue 11 (the
//! median frame at 80x24 under 1 ms; the board itself, run in tmux, under 50 MB). Run:
//! `cargo bench --bench board`.

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use loopx::board::app::{App, AppEvent, Effect};
use loopx::board::data::Loader;
use loopx::board::draw;
use loopx::board::theme::Theme;
use loopx::kernel::Ts;
use loopx::store::FileStore;
use loopx::store::files::follow;
use loopx::store::follow::Signal;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const TODOS: usize = 10_000;
const EVIDENCE_PER_TODO: usize = 10;
const GATES: usize = 20;
const JOURNAL: usize = 20_000;

fn ts(ms_ago: i64, now: Ts) -> String {
    Ts(now.0 - ms_ago).to_string()
}

fn todo_text(i: usize, now: Ts, title: &str) -> String {
    let id = format!("t-{i:06}");
    let mut s = format!(
        "schema_version = 1\nid = \"{id}\"\ntitle = \"{title} {i}\"\npriority = \"P{}\"\nstatus = \"{}\"\ncreated_by = \"bench\"\ncreated_at = \"{}\"\nupdated_at = \"{}\"\n",
        i % 5,
        if i.is_multiple_of(50) {
            "blocked"
        } else {
            "open"
        },
        ts((TODOS - i) as i64 * 1000, now),
        ts(1000, now),
    );
    if i.is_multiple_of(7) {
        let _ = writeln!(s, "depends_on = [\"t-{:06}\"]", (i + 1) % TODOS);
    }
    if i % 10 == 3 {
        let _ = write!(
            s,
            "fence = 1\n[lease]\nholder = \"agent-{}\"\nfence = 1\nacquired_at = \"{}\"\nexpires_at = \"{}\"\n",
            i % 8,
            ts(60_000, now),
            ts(-(i as i64 % 1800) * 1000, now)
        );
    }
    s
}

fn build(root: &Path, now: Ts) {
    let d = root.join(".loopx");
    for sub in ["todos", "gates", "archive", "evidence"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    std::fs::write(
        d.join("loopx.toml"),
        format!(
            "schema_version = 1\n[goal]\nid = \"bench\"\nobjective = \"Benchmark the board\"\nstatus = \"active\"\ncreated_at = \"{0}\"\nupdated_at = \"{0}\"\n",
            ts(86_400_000, now)
        ),
    )
    .unwrap();
    let mut q = String::from("schema_version = 1\n");
    for k in 0..100 {
        let _ = write!(
            q,
            "[[spend]]\nat = \"{}\"\nagent = \"agent-{}\"\nslots = 1\n",
            ts(k * 800_000, now),
            k % 8
        );
    }
    std::fs::write(d.join("quota.toml"), q).unwrap();
    for i in 0..TODOS {
        std::fs::write(
            d.join("todos").join(format!("t-{i:06}.toml")),
            todo_text(i, now, "Todo number"),
        )
        .unwrap();
        let mut ev = String::new();
        for k in 0..EVIDENCE_PER_TODO {
            let _ = writeln!(
                ev,
                "{{\"at\":\"{}\",\"agent\":\"agent-{}\",\"fence\":1,\"kind\":\"note\",\"summary\":\"step {k} of todo {i}: tests pass\"}}",
                ts((EVIDENCE_PER_TODO - k) as i64 * 60_000, now),
                i % 8
            );
        }
        std::fs::write(d.join("evidence").join(format!("t-{i:06}.jsonl")), ev).unwrap();
    }
    for g in 0..GATES {
        std::fs::write(
            d.join("gates").join(format!("g-{g:06}.toml")),
            format!(
                "schema_version = 1\nid = \"g-{g:06}\"\nquestion = \"Question {g}?\"\nblocks = [\"t-{:06}\"]\nopened_by = \"agent-1\"\nopened_at = \"{}\"\nstatus = \"pending\"\n",
                g * 97,
                ts(g as i64 * 60_000, now)
            ),
        )
        .unwrap();
    }
    let mut j = String::new();
    for s in 0..JOURNAL {
        let _ = writeln!(
            j,
            "{{\"seq\":{},\"at\":\"{}\",\"actor\":\"agent-{}\",\"action\":\"todo.update\",\"target\":\"t-{:06}\",\"data\":{{}},\"prev\":\"{}\"}}",
            s + 1,
            ts((JOURNAL - s) as i64 * 100, now),
            s % 8,
            s % TODOS,
            "0".repeat(64)
        );
    }
    std::fs::write(d.join("journal.jsonl"), j).unwrap();
}

fn rss_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn stats(mut v: Vec<Duration>) -> String {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "median {:.2} ms, p95 {:.2} ms, max {:.2} ms (n={})",
        ms(v[v.len() / 2]),
        ms(v[v.len() * 95 / 100]),
        ms(v[v.len() - 1]),
        v.len()
    )
}

fn atomic_write(path: &Path, text: &str) {
    let tmp = path.with_file_name(format!(
        ".{}.tmp-bench",
        path.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn main() {
    let now = Ts::now();
    let root: PathBuf =
        std::env::temp_dir().join(format!("loopx-board-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let t0 = Instant::now();
    build(&root, now);
    println!(
        "fixture: {TODOS} todos, {} evidence entries, {GATES} gates, {JOURNAL} journal lines (built in {:.1} s)",
        TODOS * EVIDENCE_PER_TODO,
        t0.elapsed().as_secs_f64()
    );
    let rss_before = rss_kb("VmRSS:");
    let store = FileStore::at(&root);
    let mut loader = Loader::new(Box::new(store.clone()));

    let mut full = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let d = loader.full(now);
        full.push(t.elapsed());
        assert!(d.problems.is_empty(), "{:?}", d.problems.first());
    }
    println!("full load (every file):              {}", stats(full));

    let mut app = App::new(root.display().to_string(), Theme::dark(), false, now);
    app.size = (120, 40);
    let t = Instant::now();
    let fx = app.on_event(AppEvent::Loaded(loader.full(now)));
    println!(
        "first load + derive:                 {:.1} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );
    for f in fx {
        if let Effect::LoadEvidence(id) = f {
            let r = loader.evidence(&id);
            app.on_event(AppEvent::Evidence(id, r));
        }
    }

    // A reload after a single-file change: read that file, apply, re-derive the columns.
    let path = root.join(".loopx/todos/t-004242.toml");
    let mut reload = Vec::new();
    for k in 0..50 {
        atomic_write(&path, &todo_text(4242, now, &format!("Edited {k}")));
        let t = Instant::now();
        let d = loader.changed(std::slice::from_ref(&path), now);
        let fx = app.on_event(AppEvent::Loaded(d));
        for f in fx {
            if let Effect::LoadEvidence(id) = f {
                let r = loader.evidence(&id);
                app.on_event(AppEvent::Evidence(id, r));
            }
        }
        reload.push(t.elapsed());
    }
    println!("reload after one todo file changed:  {}", stats(reload));

    let mut median_80x24 = Duration::ZERO;
    for (w, h) in [(80u16, 24u16), (120, 40), (240, 70)] {
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        app.size = (w, h);
        let mut frames = Vec::new();
        for k in 0..200 {
            app.on_event(AppEvent::Tick(Ts(now.0 + k * 1000)));
            let t = Instant::now();
            term.draw(|f| draw::frame(f, &app.scene())).unwrap();
            frames.push(t.elapsed());
        }
        if (w, h) == (80, 24) {
            median_80x24 = median(&frames);
        }
        println!(
            "frame {w}x{h}:{:>width$}{}",
            "",
            stats(frames),
            width = 26 - format!("{w}x{h}").len()
        );
    }

    // File event latency: an atomic write by "another process" until the reload is applied.
    let (tx, rx) = mpsc::channel::<Signal>();
    let dir = root.join(".loopx");
    let _w = follow::events(&dir, move |s| {
        let _ = tx.send(s);
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut lat = Vec::new();
    for k in 0..20 {
        while rx.try_recv().is_ok() {}
        let t = Instant::now();
        atomic_write(&path, &todo_text(4242, now, &format!("Watched {k}")));
        let mut paths = Vec::new();
        while let Ok(s) = rx.recv_timeout(Duration::from_secs(2)) {
            if let Signal::Changed(p) = s {
                paths = p;
                break;
            }
        }
        let d = loader.changed(&paths, now);
        app.on_event(AppEvent::Loaded(d));
        lat.push(t.elapsed());
        assert!(
            app.snap.as_ref().unwrap().todos["t-004242"]
                .title
                .starts_with(&format!("Watched {k}"))
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "write -> event -> reload applied:    {} (debounce {:?})",
        stats(lat),
        follow::DEBOUNCE
    );

    println!(
        "memory: RSS {} MB after loading (RSS before {} MB, peak {} MB)",
        rss_kb("VmRSS:") / 1024,
        rss_before / 1024,
        rss_kb("VmHWM:") / 1024
    );
    let ms = median_80x24.as_secs_f64() * 1000.0;
    println!(
        "target: median frame at 80x24 with {TODOS} todos {ms:.3} ms (under 1 ms): {}",
        verdict(ms < 1.0)
    );
    match board_memory(&root) {
        Ok((rss, peak)) => println!(
            "target: the board (`loopx board`, 80x24 in tmux) with {TODOS} todos: RSS {:.1} MB, peak {:.1} MB (under 50 MB): {}",
            rss as f64 / 1024.0,
            peak as f64 / 1024.0,
            verdict(peak < 50 * 1024)
        ),
        Err(e) => println!("target: the board's memory not measured: {e}"),
    }
    let _ = std::fs::remove_dir_all(&root);
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

/// Runs the real board on the fixture in an 80x24 tmux pane until its todos show and a few ticks
/// pass, then reads its resident and peak memory (kB) from /proc.
fn board_memory(root: &Path) -> Result<(u64, u64), String> {
    let socket = format!("loopx-bench-{}", std::process::id());
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .arg("-L")
            .arg(&socket)
            .args(args)
            .output()
            .map_err(|e| format!("tmux: {e}"))
    };
    let cmd = format!(
        "exec '{}' board --dir '{}'",
        env!("CARGO_BIN_EXE_loopx"),
        root.display()
    );
    let out = tmux(&["new-session", "-d", "-s", "b", "-x", "80", "-y", "24", &cmd])?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let result = (|| {
        let start = Instant::now();
        loop {
            let screen = tmux(&["capture-pane", "-p", "-t", "b"])?;
            if String::from_utf8_lossy(&screen.stdout).contains("○ Ready") {
                break;
            }
            if start.elapsed() > Duration::from_secs(60) {
                return Err("the board did not show its todos within 60 s".to_string());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // A few ticks, a key and a redraw, as an operator would.
        tmux(&["send-keys", "-t", "b", "Tab"])?;
        std::thread::sleep(Duration::from_secs(3));
        common::pane_memory(tmux)
    })();
    let _ = tmux(&["kill-server"]);
    result
}
