use super::*;
use proptest::prelude::*;

fn n(g: &str) -> std::result::Result<String, String> {
    glob(g)
}

#[test]
fn globs_are_normalised() {
    assert_eq!(n("./src//store/").unwrap(), "src/store");
    assert_eq!(n("src/**/**/x").unwrap(), "src/**/x");
    assert_eq!(n("**").unwrap(), "**");
    let v = normalise("--paths", &["a/".into(), "a".into(), "b".into()]).unwrap();
    assert_eq!(v, vec!["a".to_string(), "b".to_string()]);
}

#[test]
fn bad_globs_are_refused() {
    for g in [
        "", ".", "./", "/etc", "../x", "a/../b", "a\tb", "a\nb", "é", "a**", "[ab]", "{a,b}",
        "a\\b", "\u{7f}",
    ] {
        assert!(n(g).is_err(), "{g:?} was taken");
    }
    assert!(n(&"a".repeat(GLOB_MAX + 1)).is_err());
    let many: Vec<String> = (0..=PATHS_MAX).map(|i| format!("d{i}")).collect();
    let e = normalise("--paths", &many).unwrap_err();
    assert_eq!(e.code, crate::kernel::Code::Usage);
    let e = normalise("--paths", &["ok".into(), "../up".into()]).unwrap_err();
    assert!(e.message.contains("../up"), "{}", e.message);
}

#[test]
fn overlap_cases() {
    let yes = [
        ("src/store/**", "src/store/fs.rs"),
        ("src", "src/store/fs.rs"),
        ("src/*.rs", "src/lib.rs"),
        ("src/**/*.rs", "src/store/pg/*.rs"),
        ("**", "docs"),
        ("src/st?re", "src/*"),
        ("a*", "*b"),
        ("**/x", "a/b/c/x"),
    ];
    for (a, b) in yes {
        assert!(overlap(a, b), "{a} / {b}");
        assert!(overlap(b, a), "{b} / {a}");
    }
    let no = [
        ("src/store/**", "src/kernel/**"),
        ("docs", "src"),
        ("src/*.rs", "src/*.md"),
        ("a?", "abc"),
        ("x*y", "y*x"),
    ];
    for (a, b) in no {
        assert!(!overlap(a, b), "{a} / {b}");
        assert!(!overlap(b, a), "{b} / {a}");
    }
}

#[test]
fn covers_paths_below() {
    let g = vec!["src/store".to_string(), "docs/*.md".to_string()];
    assert!(covers(&g, "src/store/fs.rs"));
    assert!(covers(&g, "docs/reference.md"));
    assert!(!covers(&g, "docs/x/y.txt"));
    assert!(!covers(&g, "src/kernel/mod.rs"));
    assert!(!covers(&g, "src"));
    assert!(covers(&["**".to_string()], "any/thing"));
}

#[test]
fn many_stars_stay_fast() {
    let g = format!("{}b", "*a".repeat(90));
    let p = "a".repeat(150);
    assert!(!covers(std::slice::from_ref(&g), &p));
    let deep = format!("{}z", "**/a/".repeat(30));
    assert!(!covers(std::slice::from_ref(&deep), &"a/".repeat(60)));
    assert!(overlap(&g, &"*".repeat(100)));
}

/// A brute-force matcher: backtracking, the glob or an ancestor of the path.
fn brute(g: &str, path: &[&str]) -> bool {
    let gs: Vec<&str> = g.split('/').collect();
    (0..=path.len()).any(|k| k > 0 && brute_segs(&gs, &path[..k]))
}

fn brute_segs(g: &[&str], p: &[&str]) -> bool {
    match g.split_first() {
        None => p.is_empty(),
        Some((&"**", rest)) => (0..=p.len()).any(|k| brute_segs(rest, &p[k..])),
        Some((s, rest)) => {
            !p.is_empty() && brute_seg(s.as_bytes(), p[0].as_bytes()) && brute_segs(rest, &p[1..])
        }
    }
}

fn brute_seg(g: &[u8], s: &[u8]) -> bool {
    match g.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|k| brute_seg(rest, &s[k..])),
        Some((c, rest)) => !s.is_empty() && (*c == b'?' || *c == s[0]) && brute_seg(rest, &s[1..]),
    }
}

const SEGS: [&str; 7] = ["a", "b", "ab", "ba", "aa", "bab", "abb"];

fn all_paths() -> Vec<Vec<&'static str>> {
    let mut out: Vec<Vec<&str>> = vec![vec![]];
    let mut level: Vec<Vec<&str>> = vec![vec![]];
    for _ in 0..4 {
        level = level
            .iter()
            .flat_map(|p| {
                SEGS.iter().map(move |s| {
                    let mut q = p.clone();
                    q.push(*s);
                    q
                })
            })
            .collect();
        out.extend(level.iter().cloned());
    }
    out.remove(0);
    out
}

fn arb_glob() -> impl Strategy<Value = String> {
    let seg = prop::sample::select(vec![
        "a", "b", "*", "?", "a*", "*b", "**", "ab", "?a", "*a*",
    ]);
    prop::collection::vec(seg, 1..5).prop_map(|v| v.join("/"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn never_no_when_a_path_matches_both(a in arb_glob(), b in arb_glob()) {
        let (a, b) = (glob(&a).unwrap(), glob(&b).unwrap());
        let paths = all_paths();
        let witness = paths.iter().find(|p| brute(&a, p) && brute(&b, p));
        if let Some(p) = witness {
            prop_assert!(overlap(&a, &b), "{} / {} both match {}", a, b, p.join("/"));
        }
        prop_assert_eq!(overlap(&a, &b), overlap(&b, &a));
        for p in &paths {
            prop_assert_eq!(covers(std::slice::from_ref(&a), &p.join("/")), brute(&a, p));
        }
    }
}

#[test]
fn hostile_reservations_cost_a_bounded_number_of_steps_and_count_as_overlapping() {
    // 32 globs of 200 characters, all wildcards and one letter: every pair is a full table.
    let g: String = "*a".repeat(100);
    let mine: Vec<String> = (0..32).map(|i| format!("{}{i}", &g[..198])).collect();
    let theirs = mine.clone();
    let budget = Budget::new();
    let got = overlaps(&mine, &theirs, &budget);
    assert!(!got.is_empty(), "out of steps counts as an overlap");
    assert!(
        BUDGET_STEPS - budget.left() <= STEPS_MAX,
        "one comparison's bound"
    );
    // Asked again, the same answer, whatever is left.
    assert_eq!(overlaps(&mine, &theirs, &budget), got);
    // Literal prefixes that differ are told apart without the tables.
    let a: Vec<String> = (0..32).map(|i| format!("src/a{i}/{}", &g[..150])).collect();
    let b: Vec<String> = (0..32)
        .map(|i| format!("docs/b{i}/{}", &g[..150]))
        .collect();
    assert!(overlaps(&a, &b, &budget).is_empty());
}

#[test]
fn a_spent_budget_still_tells_prefixes_apart_and_never_says_no_to_an_overlap() {
    let empty = Budget::with(0);
    let a = vec!["src/store/**".to_string(), "docs/*.md".to_string()];
    let b = vec!["benches/**".to_string(), "src/store/fs.rs".to_string()];
    assert_eq!(
        overlaps(&a, &b, &empty),
        vec![("src/store/**".to_string(), "src/store/fs.rs".to_string())]
    );
    // Out of steps, a pair that needs the table counts as overlapping.
    let c = vec!["src/*.rs".to_string()];
    let d = vec!["src/*.md".to_string()];
    assert!(overlaps(&c, &d, &Budget::new()).is_empty());
    assert_eq!(overlaps(&c, &d, &empty).len(), 1);
}
