use super::*;
use crate::kernel::model::*;
use crate::kernel::time::Ts;

fn config() -> Config {
    toml::from_str(
        "[goal]\nid = \"goal-aaaaaa\"\nobjective = \"o\"\nstatus = \"active\"\n\
         created_at = \"2020-01-01T00:00:00Z\"\nupdated_at = \"2020-01-01T00:00:00Z\"\n",
    )
    .unwrap()
}

fn todo() -> Todo {
    toml::from_str(
        "id = \"t-aaaaaa\"\ntitle = \"t\"\nstatus = \"open\"\ncreated_by = \"a\"\n\
         created_at = \"2020-01-01T00:00:00Z\"\nupdated_at = \"2020-01-01T00:00:00Z\"\n",
    )
    .unwrap()
}

fn spend() -> Spend {
    Spend {
        at: Ts(0),
        agent: "a".into(),
        slots: 1,
        turn: None,
        tokens: None,
        cost_usd: None,
        extra: Extra::new(),
    }
}

#[test]
fn defaults_are_in_bounds() {
    assert_eq!(check_config(&config()), Ok(()));
    assert_eq!(check_todo(&todo()), Ok(()));
    assert_eq!(check_quota(&QuotaFile::default()), Ok(()));
}

#[test]
fn config_bounds_name_the_key() {
    let mut c = config();
    c.quota.window = Dur(i64::MIN);
    assert_eq!(check_config(&c).unwrap_err().path(), "quota.window");
    c.quota.window = Dur(i64::MAX);
    assert_eq!(check_config(&c).unwrap_err().path(), "quota.window");
    c.quota.window = WINDOW_MAX;
    assert_eq!(check_config(&c), Ok(()));
    c.quota.min_interval = Dur(WINDOW_MAX.0 + 1);
    assert_eq!(check_config(&c).unwrap_err().path(), "quota.min_interval");
    c.quota.min_interval = Dur(0);
    c.quota.slots = 0;
    assert_eq!(check_config(&c).unwrap_err().path(), "quota.slots");
    c.quota.slots = u32::MAX;
    assert!(check_config(&c).unwrap_err().message.contains("100000"));
    c.quota.slots = 1;
    c.lease.ttl = Dur(i64::MIN);
    assert_eq!(check_config(&c).unwrap_err().path(), "lease.ttl");
    c.lease.ttl = TTL_MAX;
    c.goal.success_criteria = vec!["ok".into(), "x".repeat(TITLE_MAX + 1)];
    assert_eq!(
        check_config(&c).unwrap_err().path(),
        "goal.success_criteria[1]"
    );
}

#[test]
fn todo_bounds_name_the_key() {
    let mut t = todo();
    t.every = Some(Dur(0));
    assert_eq!(check_todo(&t).unwrap_err().path(), "every");
    t.every = Some(EVERY_MAX);
    assert_eq!(check_todo(&t), Ok(()));
    t.fence = u64::MAX;
    assert_eq!(check_todo(&t).unwrap_err().path(), "fence");
    t.fence = FENCE_MAX;
    t.lease = Some(Box::new(Lease {
        holder: "h".repeat(65),
        fence: 1,
        acquired_at: Ts(0),
        expires_at: Ts(1),
        turn: None,
        handoff_from: None,
        base: None,
        paths: Vec::new(),
        worktree: None,
        extra: Extra::new(),
    }));
    assert_eq!(check_todo(&t).unwrap_err().path(), "lease.holder");
    t.lease = None;
    t.depends_on = vec!["t-aaaaab".into(); DEPENDS_MAX + 1];
    assert_eq!(check_todo(&t).unwrap_err().path(), "depends_on");
    t.depends_on = vec!["t-aaaaab".into(), String::new()];
    assert_eq!(check_todo(&t).unwrap_err().path(), "depends_on[1]");
    t.depends_on.clear();
    t.title = "  ".into();
    assert!(check_todo(&t).is_err());
    t.title = "é".repeat(TITLE_MAX);
    assert_eq!(check_todo(&t), Ok(()));
}

#[test]
fn spend_bounds_name_the_entry() {
    let mut q = QuotaFile {
        spends: vec![spend(), spend()],
        ..QuotaFile::default()
    };
    q.spends[1].cost_usd = Some(f64::NAN);
    assert_eq!(check_quota(&q).unwrap_err().path(), "spend[1].cost_usd");
    for bad in [f64::INFINITY, f64::NEG_INFINITY, -0.01, 2e9] {
        q.spends[1].cost_usd = Some(bad);
        assert!(check_quota(&q).is_err(), "{bad}");
    }
    q.spends[1].cost_usd = Some(0.0);
    q.spends[1].tokens = Some(u64::MAX);
    assert_eq!(check_quota(&q).unwrap_err().path(), "spend[1].tokens");
    q.spends[1].tokens = Some(TOKENS_MAX);
    q.spends[0].slots = 0;
    assert_eq!(check_quota(&q).unwrap_err().path(), "spend[0].slots");
}

#[test]
fn gate_bounds_and_usage_errors() {
    let g: Gate = toml::from_str(
        "id = \"g-aaaaaa\"\nquestion = \"q\"\noptions = [\"a\", \"\"]\nopened_by = \"a\"\n\
         opened_at = \"2020-01-01T00:00:00Z\"\nstatus = \"pending\"\n",
    )
    .unwrap();
    let v = check_gate(&g).unwrap_err();
    assert_eq!(v.path(), "options[1]");
    let e = usage(Err(v)).unwrap_err();
    assert_eq!(e.code.exit_code(), 2);
    assert!(e.message.contains("options"), "{}", e.message);
}

#[test]
fn limits_leave_room_for_sums() {
    // The latest time plus the longest duration still fits in what RFC 3339 can print.
    assert!(jiff::Timestamp::from_millisecond(Ts::MAX.0 + Dur::MAX.0).is_ok());
    assert!(EVERY_MAX <= Dur::MAX && WINDOW_MAX <= Dur::MAX && TTL_MAX <= Dur::MAX);
    assert!(FENCE_MAX < i64::MAX as u64);
}

#[test]
fn a_command_shows_the_text_it_runs() {
    for ok in [
        "true",
        "gh pr view 12 | jq -r .state",
        "printf '\\303\\251' | grep -q . && test ~ != x",
    ] {
        assert_eq!(plain_command("c", ok), Ok(()), "{ok:?}");
    }
    for bad in [
        "a\nb",
        "a\tb",
        "a\0b",
        "a\u{1b}b",
        "a\u{85}b",
        "a\u{202e}b",
        "x=1\u{a0}#;b",
        "a\u{2003}b",
        "a\u{3000}b",
        "a\u{200b}b",
        "a\u{2060}b",
        "a\u{feff}b",
        "a\u{ad}b",
        "echo ok\u{2800}#;touch pwned",
        "a\u{34f}b",
        "a\u{fe0f}b",
        "a\u{e0020}b",
        "a\u{17b4}b",
        "a\u{3164}b",
        "a\u{115f}b",
        "a\u{ffa0}b",
        "a\u{1160}b",
        "a\u{301}b",
        "t\u{435}st -f x",
        "a\u{ff1b}b",
        "test -f résumé.txt",
        "echo '日本'",
        "a\u{7f}b",
    ] {
        assert!(plain_command("c", bad).is_err(), "{bad:?}");
    }
}
