//! The board's metric chart (issue 25, part 3): the auto-research story's accuracy runs drawn
//! over time with the best marked, at 80x24 and 120x40; the headline sparkline in the header;
//! the chart's keys; the metrics read through the store, and kept bounded.

mod common;

use common::Project;
use common::frames::{snap_both, text};
use loopx::board::app::{App, AppEvent, MetricChart, Mode};
use loopx::board::data::{Delta, Loader};
use loopx::board::keymap;
use loopx::board::metrics::{self, Best, GOAL_POINTS, Metrics, MetricsDelta, Point};
use loopx::board::theme::Theme;
use loopx::flows::owner::Owner;
use loopx::kernel::{Config, Snapshot, Todo, Ts};
use loopx::store::FileStore;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const NOW: &str = "2026-12-02T09:00:00.000Z";

fn now() -> Ts {
    NOW.parse().unwrap()
}

fn ts(mins: i64) -> Ts {
    Ts(now().0 + mins * 60_000)
}

fn config() -> Config {
    toml::from_str(&format!(
        "schema_version = 1\n[goal]\nid = \"g\"\nobjective = \"Tune a k-NN classifier on iris\"\nstatus = \"active\"\ncreated_at = \"{0}\"\nupdated_at = \"{0}\"\nsuccess_criteria = [\"best k named by the evidence\"]\n",
        ts(-120)
    ))
    .unwrap()
}

fn todo(id: &str, title: &str) -> Todo {
    toml::from_str(&format!(
        "id = \"{id}\"\ntitle = \"{title}\"\nstatus = \"open\"\ncreated_by = \"proposer\"\ncreated_at = \"{0}\"\nupdated_at = \"{0}\"\n",
        ts(-100)
    ))
    .unwrap()
}

fn point(todo: &str, name: &str, mins: i64, value: f64) -> Point {
    Point {
        todo: todo.into(),
        name: name.into(),
        at: ts(mins),
        value,
    }
}

/// The auto-research runs: one todo per k, each its 5-fold accuracy; a `fit_ms` on some.
fn runs() -> Vec<Point> {
    let acc = [
        (1, 0.96),
        (3, 0.9667),
        (5, 0.9733),
        (7, 0.98),
        (9, 0.9667),
        (11, 0.98),
        (15, 0.9733),
        (21, 0.9533),
        (31, 0.9267),
    ];
    let mut v = Vec::new();
    for (i, (k, a)) in acc.iter().enumerate() {
        let id = format!("t-k{k:03}");
        v.push(point(&id, "accuracy", -90 + 10 * i as i64, *a));
        if i % 3 == 0 {
            v.push(point(&id, "fit_ms", -90 + 10 * i as i64, 40.0 - i as f64));
        }
    }
    v
}

/// A board with a ready todo (no metrics) and a review todo that holds two runs of its own.
fn board(points: Vec<Point>) -> App {
    let mut s = Snapshot::new(config());
    for t in [
        todo("t-next01", "Evaluate k-NN with k=41"),
        todo("t-review", "Review the run of k=7"),
    ] {
        s.todos.insert(t.id.clone(), t);
    }
    let mut app = App::new("/home/op/auto-research", Theme::dark(), false, now());
    app.owner = Owner {
        actor: "owner".into(),
        verified: true,
        note: "owner ✓ SHA256:0123456789abcdef".into(),
    };
    app.on_event(AppEvent::Loaded(Delta {
        full: Some(s),
        journal: Some(Vec::new()),
        done: Some(Vec::new()),
        metrics: Some(MetricsDelta {
            whole: true,
            points,
            ..MetricsDelta::default()
        }),
        at: now(),
        ..Delta::default()
    }));
    app
}

fn press(app: &mut App, c: KeyCode) {
    app.on_key(KeyEvent::new(c, KeyModifiers::NONE));
}

#[test]
fn the_goal_chart_marks_the_best_run() {
    let mut a = board(runs());
    press(&mut a, KeyCode::Char('m'));
    // The ready todo selected has no metrics: the whole goal's, its most recorded metric.
    assert_eq!(
        a.mode,
        Mode::Chart(MetricChart {
            goal: true,
            ..MetricChart::default()
        })
    );
    snap_both("chart_goal", &a);
    let t = text(&a, 80, 24);
    assert!(
        t.contains("Metrics · accuracy · the whole goal · 9 points"),
        "{t}"
    );
    // The best is the earliest of the two 0.98 runs, named with its todo and time.
    assert!(
        t.contains("█ best (max) 0.98 · t-k007 · 08:00 UTC, 1h ago"),
        "{t}"
    );
    assert!(t.contains("last 0.9267"), "{t}");
    assert!(t.contains(" accuracy (9)  fit_ms (3)"), "{t}");
    assert!(t.contains("07:30") && t.contains("08:50"), "{t}");
    // The hints are the chart's.
    assert!(t.contains("Tab metric") && t.contains("b best"), "{t}");
}

#[test]
fn keys_switch_the_metric_flip_the_best_and_close() {
    let mut a = board(runs());
    press(&mut a, KeyCode::Char('m'));
    press(&mut a, KeyCode::Tab);
    let t = text(&a, 120, 40);
    // fit_ms is a time: the lowest is best.
    assert!(
        t.contains("Metrics · fit_ms · the whole goal · 3 points"),
        "{t}"
    );
    assert!(t.contains("█ best (min) 34 · t-k015"), "{t}");
    press(&mut a, KeyCode::Char('b'));
    let t = text(&a, 120, 40);
    assert!(t.contains("█ best (max) 40 · t-k001"), "{t}");
    press(&mut a, KeyCode::Left);
    assert!(text(&a, 120, 40).contains("Metrics · accuracy"));
    press(&mut a, KeyCode::Esc);
    assert_eq!(a.mode, Mode::Normal);
}

#[test]
fn a_todo_with_metrics_shows_its_own_and_g_shows_the_goal() {
    let mut pts = runs();
    pts.push(point("t-next01", "accuracy", -5, 0.95));
    pts.push(point("t-next01", "accuracy", -2, 0.99));
    let mut a = board(pts);
    press(&mut a, KeyCode::Char('m'));
    let t = text(&a, 120, 40);
    assert!(
        t.contains("Metrics · accuracy · t-next01 · 2 points"),
        "{t}"
    );
    assert!(
        t.contains("█ best (max) 0.99 · t-next01 · 08:58 UTC, 2m ago"),
        "{t}"
    );
    press(&mut a, KeyCode::Char('g'));
    let t = text(&a, 120, 40);
    assert!(t.contains("the whole goal · 11 points"), "{t}");
}

#[test]
fn one_point_and_small_screens_draw() {
    let mut a = board(vec![point("t-next01", "loss", -3, 0.25)]);
    press(&mut a, KeyCode::Char('m'));
    let t = text(&a, 80, 24);
    assert!(
        t.contains("█ best (min) 0.25 · t-next01 · 08:57 UTC, 3m ago"),
        "{t}"
    );
    assert!(t.contains("08:57"), "{t}");
    for (w, h) in [(40, 12), (20, 6), (1, 1)] {
        text(&a, w, h);
    }
}

#[test]
fn no_metrics_says_how_to_record_one() {
    let mut a = board(Vec::new());
    press(&mut a, KeyCode::Char('m'));
    let t = text(&a, 80, 24);
    assert!(
        t.contains("no metric evidence yet: `loopx todo update ID --metric"),
        "{t}"
    );
    // No headline without metrics.
    press(&mut a, KeyCode::Esc);
    assert!(!text(&a, 80, 24).contains("best 0."));
}

#[test]
fn the_header_shows_the_headline_metric() {
    let a = board(runs());
    snap_both("view_headline", &a);
    let t = text(&a, 80, 24);
    let success = t.lines().nth(1).unwrap();
    assert!(success.contains("success: ☐ best k named"), "{t}");
    assert!(
        success.contains(" accuracy ") && success.ends_with("best 0.98 \""),
        "{t}"
    );
}

#[test]
fn stored_text_is_escaped() {
    let mut pts = runs();
    pts.push(point("t-next01", "acc\u{1b}[31m", -1, 1.0));
    let mut a = board(pts);
    press(&mut a, KeyCode::Char('m'));
    let t = text(&a, 120, 40);
    assert!(t.contains("acc\\x1b[31m"), "{t}");
    assert!(!t.contains('\u{1b}'), "{t}");
}

#[test]
fn the_help_lists_the_chart_keys() {
    let lines = keymap::help_lines(false);
    let has = |k: &str, h: &str| {
        lines
            .iter()
            .any(|(key, help)| key.as_deref() == Some(k) && help.contains(h))
    };
    assert!(has("m", "metric chart"));
    assert!(has("b", "highest value or the lowest"));
    assert!(
        lines
            .iter()
            .any(|(k, h)| k.is_none() && h == "Metric chart")
    );
}

#[test]
fn best_follows_the_name_and_ties_go_to_the_earliest() {
    assert_eq!(Best::of("accuracy"), Best::Max);
    assert_eq!(Best::of("val_loss"), Best::Min);
    assert_eq!(Best::of("p50_latency"), Best::Min);
    assert_eq!(Best::of("Error_rate"), Best::Min);
    let pts = [point("a", "x", 0, 2.0), point("b", "x", 1, 2.0)];
    let refs: Vec<&Point> = pts.iter().collect();
    assert_eq!(metrics::best(&refs, Best::Max), Some(0));
    assert_eq!(metrics::best(&[], Best::Max), None);
}

#[test]
fn a_todo_read_replaces_its_points_and_the_goal_keeps_the_newest() {
    let mut m = Metrics::default();
    m.apply(MetricsDelta {
        whole: true,
        points: runs(),
        ..MetricsDelta::default()
    });
    m.apply(MetricsDelta {
        todos: vec!["t-k001".into()],
        points: vec![point("t-k001", "accuracy", 1, 0.5)],
        ..MetricsDelta::default()
    });
    assert_eq!(m.series("accuracy", Some("t-k001")).len(), 1);
    assert!(m.series("fit_ms", Some("t-k001")).is_empty());
    assert_eq!(m.points.last().unwrap().value, 0.5);
    let many: Vec<Point> = (0..GOAL_POINTS as i64 + 50)
        .map(|i| point("t-x", "loss", i, i as f64))
        .collect();
    m.apply(MetricsDelta {
        todos: vec!["t-x".into()],
        points: many,
        ..MetricsDelta::default()
    });
    assert_eq!(m.points.len(), GOAL_POINTS);
    assert_eq!(m.headline().as_deref(), Some("loss"));
}

#[test]
fn the_loader_reads_metrics_through_the_store() {
    let p = Project::new("board-chart");
    let a = p.add("Evaluate k=3", &[]);
    p.ok_as("executor", &["todo", "claim", &a]);
    p.ok_as(
        "executor",
        &["todo", "update", &a, "--metric", "accuracy=0.9667"],
    );
    p.ok_as("executor", &["todo", "update", &a, "--evidence", "a note"]);
    let mut loader = Loader::new(Box::new(FileStore::at(p.root())));
    let d = loader.full(Ts::now());
    let m = d.metrics.expect("metrics read");
    assert!(m.whole);
    assert_eq!(m.points.len(), 1, "{m:?}");
    assert_eq!(
        (m.points[0].todo.as_str(), m.points[0].value),
        (a.as_str(), 0.9667)
    );
    // A change to the todo's evidence reads that todo's metrics again.
    p.ok_as(
        "executor",
        &["todo", "update", &a, "--metric", "accuracy=0.98"],
    );
    let d = loader.changed(&[p.lx(&format!("evidence/{a}.jsonl"))], Ts::now());
    let m = d.metrics.expect("metrics read");
    assert_eq!(
        (m.whole, m.todos.clone(), m.points.len()),
        (false, vec![a.clone()], 2)
    );
    // A full load after the first reads only the todos new journal lines name.
    p.ok_as(
        "executor",
        &["todo", "update", &a, "--metric", "accuracy=0.99"],
    );
    let m = loader.full(Ts::now()).metrics.expect("metrics read");
    assert_eq!((m.whole, m.todos, m.points.len()), (false, vec![a], 3));
    assert!(loader.full(Ts::now()).metrics.is_none());
}
