//! `weft guest new | build | test`: write a code step in Rust, TypeScript,
//! JavaScript, Python or C without meeting the WIT. `new` makes a buildable,
//! tested project from a template; `build` finds the project's language from
//! its files and makes the component (or, for C, the WASI command), printing
//! its path on stdout; `test` runs the project's native unit tests. The
//! toolchains (esbuild + componentize-js, componentize-py) are pinned in the
//! SDK folders and installed once into weft's cache on first use.

mod build;
mod new;
mod toolchain;

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Subcommand, ValueEnum};

use super::{Exit, bad};

#[derive(Debug, Subcommand)]
pub enum GuestCommand {
    /// Make a new step project in the folder NAME: a hello step and its unit test.
    New {
        /// The project's language.
        #[arg(long, value_enum)]
        lang: Lang,
        /// The step's name, also the new folder's (lower case letters, digits, `-`).
        name: String,
        /// The weft checkout whose guest SDKs the project uses (default: $WEFT_SDK_DIR, else the checkout weft was built from).
        #[arg(long, value_name = "DIR")]
        sdk: Option<PathBuf>,
    },
    /// Build the step project in DIR (default: here) and print the built file's path.
    Build {
        /// The project folder.
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// The weft checkout with the guest SDKs and the WIT (default: $WEFT_SDK_DIR, else the checkout weft was built from).
        #[arg(long, value_name = "DIR")]
        sdk: Option<PathBuf>,
    },
    /// Run the step project's native unit tests (cargo test, npm test, python3 -m unittest, test.sh).
    Test {
        /// The project folder.
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// The weft checkout with the guest SDKs (default: $WEFT_SDK_DIR, else the checkout weft was built from).
        #[arg(long, value_name = "DIR")]
        sdk: Option<PathBuf>,
    },
}

/// A language `weft guest` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// Rust with the `weft-guest` crate.
    Rust,
    /// TypeScript with the `weft-guest` npm package (zod schemas).
    Ts,
    /// JavaScript with the `weft-guest` npm package (zod schemas).
    Js,
    /// Python with the `weft_guest` package (schemas from type hints).
    Python,
    /// C as a WASI command (no SDK).
    C,
}

impl Lang {
    fn name(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Ts => "TypeScript",
            Lang::Js => "JavaScript",
            Lang::Python => "Python",
            Lang::C => "C",
        }
    }
}

pub fn run(cmd: GuestCommand) -> anyhow::Result<Exit> {
    match cmd {
        GuestCommand::New { lang, name, sdk } => new::run(lang, &name, &Sdk::find(sdk)?),
        GuestCommand::Build { dir, sdk } => {
            let dir = project_dir(&dir)?;
            let sdk = Sdk::find(sdk)?;
            let built = build::build(&dir, &sdk)?;
            outln!("{}", built.display());
            Ok(Exit::Success)
        }
        GuestCommand::Test { dir, sdk } => build::test(&project_dir(&dir)?, &Sdk::find(sdk)?),
    }
}

fn project_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::canonicalize(dir).with_context(|| format!("cannot open the project folder {}", dir.display())).map_err(bad)
}

/// A weft checkout: the guest SDKs (`guest-sdk/`, `guest-sdk/js`,
/// `guest-sdk/python`) and the WIT (`wit/`).
#[derive(Debug, Clone)]
pub struct Sdk {
    pub root: PathBuf,
}

impl Sdk {
    /// `--sdk`, else `$WEFT_SDK_DIR`, else the checkout this binary was built from.
    fn find(flag: Option<PathBuf>) -> anyhow::Result<Sdk> {
        let (root, from) = match (flag, std::env::var_os("WEFT_SDK_DIR")) {
            (Some(dir), _) => (dir, "--sdk"),
            (None, Some(dir)) => (PathBuf::from(dir), "$WEFT_SDK_DIR"),
            (None, None) => (Path::new(env!("CARGO_MANIFEST_DIR")).join(".."), "the checkout weft was built from"),
        };
        let wit = root.join("wit/step.wit");
        if !wit.is_file() || !root.join("guest-sdk/Cargo.toml").is_file() {
            return Err(bad(anyhow::anyhow!(
                "{} ({from}) is not a weft checkout: it has no wit/step.wit and guest-sdk/; pass --sdk DIR or set WEFT_SDK_DIR to a weft checkout",
                root.display()
            )));
        }
        let root = std::fs::canonicalize(&root).with_context(|| format!("cannot open {}", root.display()))?;
        Ok(Sdk { root })
    }

    fn wit(&self) -> PathBuf {
        self.root.join("wit")
    }

    fn js(&self) -> PathBuf {
        self.root.join("guest-sdk/js")
    }

    fn python(&self) -> PathBuf {
        self.root.join("guest-sdk/python")
    }
}
