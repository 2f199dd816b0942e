//! Budgets (tokens and cost per window) through the real binary: throttling and its reason, a
//! spend past a limit recorded with exit 3, the owner's seal over a hand edit, and exit 7.

mod common;

use common::*;
use serde_json::Value;

/// A project with one open todo, so should-run gets as far as the quota.
fn project(tag: &str) -> Project {
    let p = Project::new(tag);
    p.add("work", &[]);
    p
}

fn should_run(p: &Project) -> Value {
    let r = p.run(&["quota", "should-run", "--json"]);
    let v = parse_json(&r, "should-run");
    assert!(
        r.stdout.len() < 1024,
        "the answer stays under 1 KB: {}",
        r.stdout
    );
    v
}

#[test]
fn a_spent_token_budget_throttles_and_says_so() {
    let p = project("tokens");
    let v = p.ok(&["quota", "set", "--tokens", "100"]);
    assert_eq!(
        v["quota"]["tokens"],
        serde_json::json!({"used": 0, "limit": 100})
    );
    let a = should_run(&p);
    assert_eq!(a["decision"], "run");
    assert_eq!(a["quota"]["tokens"]["limit"], 100);
    assert!(
        a["quota"].get("cost_usd").is_none(),
        "no cost budget, no field: {a}"
    );

    // Exactly the budget: recorded, not past it (exit 0), but the next turn waits.
    let v = p.ok(&["quota", "spend-slot", "--tokens", "100"]);
    assert!(v.get("over_limit").is_none(), "{v}");
    let a = should_run(&p);
    assert_eq!(a["should_run"], false);
    assert_eq!(a["decision"], "throttled");
    assert_eq!(a["reason"], "tokens_spent");
    assert!(a["retry_after_s"].as_i64().is_some_and(|s| s > 0), "{a}");
    assert_eq!(
        a["quota"]["tokens"],
        serde_json::json!({"used": 100, "limit": 100})
    );

    // The text answers name it too.
    let r = p.run(&["quota", "should-run"]);
    assert_eq!(r.code, 3);
    assert!(r.stdout.contains("tokens_spent"), "{}", r.stdout);
    let r = p.run(&["quota", "show"]);
    assert!(r.stdout.contains("100 of 100 tokens"), "{}", r.stdout);
    let r = p.run(&["status"]);
    assert!(r.stdout.contains("100 of 100 tokens"), "{}", r.stdout);
    assert_eq!(p.ok(&["status"])["quota"]["tokens"]["used"], 100);

    // `none` removes the budget: the turn runs again, and the field is gone.
    let v = p.ok(&["quota", "set", "--tokens", "none"]);
    assert!(v["quota"].get("tokens").is_none(), "{v}");
    assert_eq!(should_run(&p)["decision"], "run");
    // The owner's changes leave doctor with nothing to say about [quota].
    let (code, d) = p.json(&["doctor"]);
    assert_eq!(code, 0, "{d}");
}

#[test]
fn a_spend_past_the_cost_budget_is_recorded_with_exit_3() {
    let p = project("cost");
    p.ok(&["quota", "set", "--cost-usd", "1.00"]);
    p.ok(&["quota", "spend-slot", "--cost-usd", "0.40"]);
    let (code, v) = p.json(&["quota", "spend-slot", "--cost-usd", "0.70", "--tokens", "5"]);
    assert_eq!(code, 3, "{v}");
    assert_eq!(v["ok"], true);
    assert_eq!(v["recorded"], true);
    assert_eq!(v["over_limit"], serde_json::json!(["cost_usd"]));
    assert_eq!(
        v["quota"]["cost_usd"],
        serde_json::json!({"used": 1.1, "limit": 1.0})
    );
    // Recorded: in quota.toml and in the journal, with the limits it went past.
    let q = std::fs::read_to_string(p.lx("quota.toml")).unwrap();
    assert_eq!(q.matches("[[spend]]").count(), 2, "{q}");
    let last = p.journal().pop().unwrap();
    assert_eq!(last["action"], "quota.spend");
    assert_eq!(last["data"]["over_limit"], serde_json::json!(["cost_usd"]));
    let a = should_run(&p);
    assert_eq!(
        (a["decision"].as_str(), a["reason"].as_str()),
        (Some("throttled"), Some("cost_spent"))
    );
    // Text names it on a line of its own.
    let r = p.run(&["quota", "spend-slot", "--cost-usd", "0.01"]);
    assert_eq!(r.code, 3);
    assert!(
        r.stdout.contains("over the limit: cost_usd"),
        "{}",
        r.stdout
    );
}

#[test]
fn slots_tokens_and_cost_are_all_named_and_slots_come_first() {
    let p = project("all");
    p.ok(&[
        "quota",
        "set",
        "--slots",
        "1",
        "--tokens",
        "10",
        "--cost-usd",
        "0.5",
    ]);
    p.ok(&["quota", "spend-slot"]);
    let (code, v) = p.json(&["quota", "spend-slot", "--tokens", "11", "--cost-usd", "1"]);
    assert_eq!(code, 3);
    assert_eq!(
        v["over_limit"],
        serde_json::json!(["slots", "tokens", "cost_usd"])
    );
    assert_eq!(should_run(&p)["reason"], "quota_spent");
    // A turn id already recorded is not recorded again, and says nothing about limits.
    p.ok(&[
        "quota",
        "set",
        "--slots",
        "100",
        "--tokens",
        "none",
        "--cost-usd",
        "none",
    ]);
    p.ok(&["quota", "spend-slot", "--turn", "t1"]);
    let v = p.ok(&["quota", "spend-slot", "--turn", "t1"]);
    assert_eq!(v["recorded"], false);
}

#[test]
fn a_budget_raised_or_removed_by_hand_is_overridden_by_the_seal() {
    let p = project("hand");
    p.ok(&["quota", "set", "--tokens", "100", "--cost-usd", "2"]);
    p.ok(&["quota", "spend-slot", "--tokens", "100"]);
    let path = p.lx("loopx.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("tokens = 100"), "{text}");
    for edited in [
        text.replace("tokens = 100", "tokens = 1000000"),
        text.replace("tokens = 100\n", "")
            .replace("cost_usd = 2.0\n", ""),
    ] {
        std::fs::write(&path, &edited).unwrap();
        let (code, a) = p.no_key(&["quota", "should-run"]);
        assert_eq!(code, 3, "{a}");
        assert_eq!(a["reason"], "tokens_spent", "{a}");
        assert_eq!(a["quota"]["tokens"]["limit"], 100);
        let notes = a["owner_notes"].to_string();
        assert!(notes.contains("budgets"), "{a}");
        let (_, s) = p.no_key(&["quota", "show"]);
        assert_eq!(s["quota"]["tokens"]["limit"], 100, "{s}");
    }
    // doctor names it, from the seal and from the owner's last quota.set line.
    std::fs::write(&path, text.replace("tokens = 100", "tokens = 1000000")).unwrap();
    let (code, d) = p.no_key(&["doctor"]);
    assert_eq!(code, 6, "{d}");
    let d = d.to_string();
    assert!(
        d.contains("budgets differ") && d.contains("[quota] is"),
        "{d}"
    );
    // The owner adopts the edit: then it counts.
    p.ok(&["owner", "seal", "--adopt"]);
    let a = should_run(&p);
    assert_eq!(a["decision"], "run", "{a}");
    assert_eq!(a["quota"]["tokens"]["limit"], 1_000_000);
}

#[test]
fn setting_a_budget_needs_the_owner_key() {
    let p = project("nokey");
    let before = p.files();
    let (code, v) = p.no_key(&["quota", "set", "--tokens", "5"]);
    assert_eq!(code, 7, "{v}");
    assert_err(&v, "denied");
    let (code, _) = p.no_key(&["quota", "set", "--cost-usd", "none"]);
    assert_eq!(code, 7);
    let after = p.files();
    assert_eq!(before.get("loopx.toml"), after.get("loopx.toml"));
    assert_eq!(before.get("journal.jsonl"), after.get("journal.jsonl"));
}

#[test]
fn budget_values_are_bounded() {
    let p = project("bounds");
    for args in [
        ["--tokens", "0"],
        ["--tokens", "-1"],
        ["--tokens", "1000000000001"],
        ["--tokens", "lots"],
        ["--cost-usd", "0"],
        ["--cost-usd", "-1"],
        ["--cost-usd", "NaN"],
        ["--cost-usd", "inf"],
        ["--cost-usd", "1000000001"],
    ] {
        let mut a = vec!["quota", "set"];
        a.extend_from_slice(&args);
        p.fails(&a, "usage");
    }
    p.fails(
        &["quota", "spend-slot", "--tokens", "1000000000001"],
        "usage",
    );
    // Out of bounds in the file: exit 6 naming the key.
    let path = p.lx("loopx.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("[quota]\n", "[quota]\ncost_usd = -3.0\n"),
    )
    .unwrap();
    let v = p.fails(&["quota", "show"], "invalid_state");
    assert!(v.to_string().contains("quota.cost_usd"), "{v}");
}

mod props {
    //! The budget rules on made-up spends: throttled exactly when a limit is reached, free again
    //! exactly when it says, and a spend past a limit is one that throttles.
    use loopx::kernel::model::{Extra, QuotaFile, QuotaPolicy, Spend};
    use loopx::kernel::quota::{self, Limit};
    use loopx::kernel::{Dur, Ts};
    use proptest::prelude::*;

    const NOW: Ts = Ts(1_800_000_000_000);

    fn spends() -> impl Strategy<Value = Vec<Spend>> {
        prop::collection::vec((0i64..7_200, 1u32..3, 0u64..300, 0u32..400), 0..30).prop_map(|v| {
            v.into_iter()
                .map(|(ago, slots, tokens, cents)| Spend {
                    at: NOW.sub(Dur::from_secs(ago)),
                    agent: "a".into(),
                    slots,
                    turn: None,
                    tokens: (tokens > 0).then_some(tokens),
                    cost_usd: (cents > 0).then_some(f64::from(cents) / 100.0),
                    extra: Extra::new(),
                })
                .collect()
        })
    }

    fn policy() -> impl Strategy<Value = QuotaPolicy> {
        (
            1u32..40,
            prop::option::of(1u64..2_000),
            prop::option::of(1u32..5_000),
        )
            .prop_map(|(slots, tokens, cents)| QuotaPolicy {
                slots,
                window: Dur::from_hours(1),
                tokens,
                cost_usd: cents.map(|c| f64::from(c) / 100.0),
                ..QuotaPolicy::default()
            })
    }

    /// Every limit reached (used at or above it) at `now`, from the usage.
    fn reached(q: &QuotaFile, p: &QuotaPolicy, now: Ts) -> Vec<Limit> {
        let u = quota::usage(q, p, now);
        let mut out = Vec::new();
        if u.used >= u64::from(u.limit) {
            out.push(Limit::Slots);
        }
        if u.tokens.is_some_and(|b| b.used >= b.limit) {
            out.push(Limit::Tokens);
        }
        if u.cost_usd.is_some_and(|b| b.used >= b.limit - 1e-9) {
            out.push(Limit::Cost);
        }
        out
    }

    proptest! {
        #[test]
        fn throttled_exactly_while_a_limit_is_reached(s in spends(), p in policy()) {
            let q = QuotaFile { spends: s, ..QuotaFile::default() };
            let spent: Vec<Limit> = quota::spent(&q, &p, NOW).iter().map(|x| x.0).collect();
            prop_assert_eq!(&spent, &reached(&q, &p, NOW));
            let t = quota::throttled(&q, &p, NOW);
            prop_assert_eq!(t.map(|x| x.0), spent.first().copied());
            if let Some((_, d)) = t {
                prop_assert!(reached(&q, &p, NOW.add(d)).is_empty(), "free at the time it says");
                if d.0 > 1 {
                    prop_assert!(!reached(&q, &p, NOW.add(Dur(d.0 - 1))).is_empty(), "not before");
                }
            }
            for l in quota::over_limit(&q, &p, NOW) {
                prop_assert!(spent.contains(&l), "{l:?} is past but not spent");
            }
            let a = serde_json::to_string(&quota::usage(&q, &p, NOW)).unwrap();
            prop_assert!(a.len() < 300, "{a}");
        }
    }
}
