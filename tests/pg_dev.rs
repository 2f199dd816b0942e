//! Scratch: the PostgreSQL store by the library (replaced by the conformance suite).
mod common;
use common::Project;
use loopx::kernel::ops;
use loopx::store::pg::{PgStore, schema::Roles};
use loopx::store::{Store, StoreExt};

#[test]
fn import_claim_export() {
    let Ok(base) = std::env::var("LOOPX_TEST_PG") else {
        return;
    };
    let db = format!("lx_dev_{}", std::process::id());
    let mut admin = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .unwrap();
    let url = base.rsplit_once('/').unwrap().0.to_string() + "/" + &db;
    let p = Project::new("pgdev");
    for i in 0..5 {
        p.add(&format!("t{i}"), &[]);
    }
    p.gate("Ship it?", &[]);
    let env = loopx::store::fs::Env::default();
    let s = PgStore::new(&url, env).unwrap();
    s.migrate(&Roles::with_prefix("lxdev").unwrap()).unwrap();
    let files = loopx::store::FileStore::at(p.root());
    let m = s.import(&files).unwrap();
    eprintln!("imported {m:?}");
    let snap = s.load().unwrap();
    assert_eq!(snap.todos.len(), 5);
    let now = loopx::kernel::Ts::now();
    for agent in ["a1", "a2"] {
        let mut tx = s.begin().unwrap();
        tx.reserve_claim(agent, now).unwrap();
        let (c, t) = ops::claim(
            tx.snapshot(),
            agent,
            now,
            loopx::kernel::Dur::from_mins(5),
            None,
        )
        .unwrap();
        tx.commit(c).unwrap();
        eprintln!("{agent} claimed {}", t.id);
    }
    let snap = s.load().unwrap();
    assert_eq!(snap.todos.values().filter(|t| t.lease.is_some()).count(), 2);
    let out = common::TempDir::new("pgdev-export");
    s.export(&out.path).unwrap();
    let f2 = loopx::store::FileStore::at(&out.path);
    let snap2 = f2.load().unwrap();
    assert_eq!(snap2.todos.len(), 5);
    assert!(snap2.owner_notes.is_empty(), "{:?}", snap2.owner_notes);
    let _ = s.mutate(|_| Ok((ops::Change::default(), ())));
}
