//! Every target's checked-in seeds (seeds/NAME/*) through its check, on
//! stable: the replay CI runs where no nightly toolchain is installed,
//! and a check that a seed (or a crash input added as one) still passes.

use std::{fs, path::Path};

#[test]
fn every_seed_passes_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let mut total = 0;
    for (name, check) in sluice_fuzz::TARGETS {
        let dir = root.join(name);
        let mut seeds: Vec<_> = fs::read_dir(&dir)
            .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
            .map(|entry| entry.expect("a seed").path())
            .collect();
        seeds.sort();
        assert!(!seeds.is_empty(), "{name}: no seeds in {}", dir.display());
        for seed in &seeds {
            let data = fs::read(seed).expect("read a seed");
            let run = std::panic::catch_unwind(|| check(&data));
            assert!(run.is_ok(), "{name}: {} fails its check", seed.display());
        }
        println!("{name}: {} seeds", seeds.len());
        total += seeds.len();
    }
    println!(
        "{total} seeds of {} targets replayed",
        sluice_fuzz::TARGETS.len()
    );
}
