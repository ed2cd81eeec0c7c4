//! The Rust code blocks of the documentation site, run as doctests:
//! `cargo test -p clockflake-docs --doc` (docs/tools/snippets.py runs it, and checks that every
//! page with a rust block is included here). README.md's are also the lease crate's doctests.
#![no_std]

#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct Readme;

#[cfg(doctest)]
#[doc = include_str!("../../getting-started/rust.md")]
struct GettingStartedRust;

#[cfg(doctest)]
#[doc = include_str!("../../concepts/layouts.md")]
struct Layouts;

#[cfg(doctest)]
#[doc = include_str!("../../concepts/leases.md")]
struct Leases;

#[cfg(doctest)]
#[doc = include_str!("../../migrations.md")]
struct Migrations;

#[cfg(doctest)]
#[doc = include_str!("../../concepts/public-ids.md")]
struct PublicIds;
