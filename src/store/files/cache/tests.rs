//! The cache's rows and the kept listing: round trips, and forged bytes read as a miss.

use super::*;
use crate::kernel::{Check, Dur, Extra, Lease, Priority, Role, Status, Ts};

fn todo() -> Todo {
    Todo {
        schema_version: 1,
        id: "t-abcdef".into(),
        title: "a title, with \"quotes\"".into(),
        role: Role::User,
        priority: Priority::P1,
        status: Status::Blocked,
        depends_on: vec!["t-zzzzzz".into()],
        every: Some(Dur::from_hours(2)),
        next_due_at: Some(Ts(1_800_000_000_123)),
        created_by: "agent-a".into(),
        created_at: Ts(1_700_000_000_001),
        updated_at: Ts(1_700_000_000_002),
        reason: Some("waiting".into()),
        status_by: Some("agent-a".into()),
        fence: 7,
        overdue_noted: Some(Ts(1_800_000_000_124)),
        requires: vec!["code.rust".into()],
        reviews: Some("t-zzzzzz".into()),
        exclude_agents: vec!["agent-c".into()],
        check: Some(Box::new(Check {
            command: "gh pr view 12 --json state".into(),
            proposed_by: "agent-a".into(),
            proposed_at: Ts(1_700_000_000_005),
            last_hash: Some("ab".repeat(32)),
            last_run_at: Some(Ts(1_700_000_000_006)),
            last_exit: Some(-3),
            extra: Extra::new(),
        })),
        lease: Some(Box::new(Lease {
            holder: "agent-b".into(),
            fence: 7,
            acquired_at: Ts(1_700_000_000_003),
            expires_at: Ts(1_700_000_000_004),
            turn: None,
            handoff_from: None,
            base: None,
            paths: vec!["src/store/**".into()],
            worktree: None,
            extra: Extra::new(),
        })),
        body: None,
        links: Vec::new(),
        stall: None,
        paths: vec!["src/a;b,c".into(), "docs/*.md".into()],
        extra: Extra::new(),
    }
}

fn key(n: u64) -> Key {
    Key {
        ino: n,
        size: 10,
        ctime_ns: 1,
        mtime_ns: 2,
    }
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("loopx-cache-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d.join("todos.bin")
}

/// What a load takes from the cache for one name: the key it was cached under, and its todo.
fn get(c: &Cache, name: &str) -> Option<(Key, Todo)> {
    let (mut todos, keys) = c.decode(&[name.to_string()]);
    Some((keys[0]?, todos.pop()?.1?))
}

#[test]
fn a_row_keeps_every_field() {
    let mut t = todo();
    t.body = Some("why\nand how".into());
    t.links = vec!["https://example.com/1".into()];
    if let Some(l) = t.lease.as_mut() {
        l.turn = Some("turn-1".into());
        l.handoff_from = Some("agent-z".into());
        l.worktree = Some("wt".into());
    }
    let path = tmp("every");
    Cache::write(&path, &[("t-abcdef", key(1), &t)], i64::MAX);
    assert_eq!(get(&Cache::read(&path), "t-abcdef"), Some((key(1), t)));
}

#[test]
fn each_row_has_its_key_and_an_unknown_name_is_a_miss() {
    let t = todo();
    let path = tmp("miss");
    Cache::write(&path, &[("b", key(2), &t), ("a", key(1), &t)], i64::MAX);
    let c = Cache::read(&path);
    assert_eq!(get(&c, "0"), None);
    assert_eq!(get(&c, "b").map(|r| r.0), Some(key(2)));
    let names = ["0", "a", "b", "c"].map(String::from);
    let (todos, keys) = c.decode(&names);
    assert_eq!(keys, [None, Some(key(1)), Some(key(2)), None]);
    let got: Vec<_> = todos
        .iter()
        .map(|(s, t)| (s.as_str(), t.is_some()))
        .collect();
    assert_eq!(got, [("0", false), ("a", true), ("b", true), ("c", false)]);
}

#[test]
fn unsettled_files_and_unknown_keys_are_not_cached() {
    let mut odd = todo();
    odd.extra.insert("mine".into(), toml::Value::Integer(1));
    let mut lease = todo();
    if let Some(l) = lease.lease.as_mut() {
        l.extra.insert("mine".into(), toml::Value::Integer(1));
    }
    let mut check = todo();
    if let Some(c) = check.check.as_mut() {
        c.extra.insert("mine".into(), toml::Value::Integer(1));
    }
    for t in [&odd, &lease, &check] {
        assert!(!codec::cacheable(t));
    }
    let path = tmp("unsettled");
    let fresh = Key {
        mtime_ns: 1_000,
        ..key(1)
    };
    let t = todo();
    Cache::write(&path, &[("a", fresh, &t), ("b", key(2), &odd)], 1_000);
    assert_eq!(Cache::read(&path).rows().count(), 0);
}

#[test]
fn any_forged_byte_is_a_miss_never_a_panic() {
    let t = todo();
    let path = tmp("forged");
    Cache::write(&path, &[("a", key(1), &t), ("b", key(2), &t)], i64::MAX);
    let good = std::fs::read(&path).unwrap();
    assert_eq!(Cache::read(&path).rows().count(), 2);
    let read = |b: &[u8]| {
        std::fs::write(&path, b).unwrap();
        let c = Cache::read(&path);
        let n = c.rows().count();
        (n, get(&c, "a").is_some_and(|(k, _)| k == key(1)))
    };
    for cut in 0..good.len() {
        assert_eq!(
            read(&good[..cut]),
            (0, false),
            "a cache cut at {cut} was read"
        );
    }
    for i in 0..good.len() {
        for v in [0u8, 1, 0x7f, 0xff] {
            let mut b = good.clone();
            b[i] = v;
            // Either refused or read into todos that pass the bounds: never a panic.
            assert!(read(&b).0 <= 2);
        }
    }
    let mut huge = good[..12].to_vec();
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(read(&huge), (0, false));
}

#[test]
fn a_row_out_of_bounds_is_a_miss() {
    let mut t = todo();
    t.title = "x".repeat(1 << 20);
    let path = tmp("bounds");
    Cache::write(&path, &[("a", key(1), &t)], i64::MAX);
    assert_eq!(get(&Cache::read(&path), "a"), None);
}

#[test]
fn a_kept_listing_is_used_only_under_its_directory_key() {
    let path = tmp("listing");
    let dir = path.with_file_name("todos");
    std::fs::create_dir_all(&dir).unwrap();
    for n in ["b", "a", ".hidden", "c"] {
        std::fs::write(dir.join(format!("{n}.toml")), "x").unwrap();
    }
    std::fs::write(dir.join("note.txt"), "x").unwrap();
    let kept = path.with_file_name("todos.names");
    let l = listing::list(&dir, &kept, i64::MAX).unwrap().unwrap();
    assert_eq!(l.names, ["a", "b", "c"]);
    l.keep.expect("a settled directory is kept").write(&kept);
    let again = listing::list(&dir, &kept, i64::MAX).unwrap().unwrap();
    assert!(again.keep.is_none(), "the kept listing was used");
    assert_eq!(again.names, l.names);
    std::fs::remove_file(dir.join("b.toml")).unwrap();
    let after = listing::list(&dir, &kept, i64::MAX).unwrap().unwrap();
    assert_eq!(after.names, ["a", "c"], "a removal changes the key");
    let unsettled = listing::list(&dir, &kept, 0).unwrap().unwrap();
    assert!(
        unsettled.keep.is_none(),
        "a directory changed just now is not kept"
    );
    assert!(matches!(unsettled.stats[0], listing::Stat::File(_)));
}

/// Past the two-thread mark, every stat still lands on its own name: each file has its own size.
#[test]
fn a_large_listing_gives_each_name_its_own_stat() {
    let path = tmp("large");
    let dir = path.with_file_name("todos");
    std::fs::create_dir_all(&dir).unwrap();
    let names: Vec<String> = (0..700).map(|i| format!("t-{i:04}")).collect();
    for (i, n) in names.iter().enumerate() {
        std::fs::write(dir.join(format!("{n}.toml")), "x".repeat(i + 1)).unwrap();
    }
    std::fs::remove_file(dir.join("t-0300.toml")).unwrap();
    std::os::unix::fs::symlink("t-0001.toml", dir.join("t-0300.toml")).unwrap();
    let kept = path.with_file_name("todos.names");
    let (l, seen) = listing::list_with(&dir, &kept, i64::MAX, <[String]>::len)
        .unwrap()
        .unwrap();
    assert_eq!(seen, 700);
    assert_eq!(l.names, names);
    for (i, st) in l.stats.iter().enumerate() {
        match st {
            listing::Stat::File(k) => assert_eq!(k.size, i as u64 + 1, "{}", names[i]),
            listing::Stat::Other(_) => assert_eq!(i, 300),
            listing::Stat::Gone => panic!("{} not stat-ed", names[i]),
        }
    }
}

#[test]
fn no_list_of_a_todo_may_be_longer_than_a_row_reads() {
    use crate::kernel::{agents, limits, reserve};
    for max in [
        limits::DEPENDS_MAX,
        limits::LINKS_MAX,
        agents::EXCLUDE_MAX,
        agents::CAPS_MAX,
        reserve::PATHS_MAX,
    ] {
        assert!(max <= codec::LIST_MAX);
    }
    // A count of empty strings, each its 4-byte length: read up to the limit, refused past it.
    let row = |n: u32| {
        let mut b = n.to_le_bytes().to_vec();
        (0..n).for_each(|_| b.extend_from_slice(&0u32.to_le_bytes()));
        b
    };
    let max = codec::LIST_MAX as u32;
    assert_eq!(
        codec::R(&row(max)).list().map(|l| l.len()),
        Some(codec::LIST_MAX)
    );
    assert_eq!(codec::R(&row(max + 1)).list(), None);
}
