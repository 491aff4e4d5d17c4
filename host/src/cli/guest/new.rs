//! `weft guest new --lang L NAME`: a fresh folder `NAME/` holding a hello
//! step in language L with its native unit test, ready for `weft guest
//! build`. The templates are files under `templates/`, compiled in; the
//! project refers to the SDK of the weft checkout by path (`file:` for npm,
//! a pip URL, a cargo path), resolved now.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::{Lang, Sdk};
use crate::cli::{Exit, bad};

/// One file of a template: where it goes (placeholders allowed) and what it holds.
type File = (&'static str, &'static str);

const TS: &[File] = &[
    ("package.json", include_str!("templates/ts/package.json.tmpl")),
    (".npmrc", include_str!("templates/ts/npmrc.tmpl")),
    (".gitignore", include_str!("templates/ts/gitignore.tmpl")),
    ("tsconfig.json", include_str!("templates/ts/tsconfig.json.tmpl")),
    ("src/step.ts", include_str!("templates/ts/step.ts.tmpl")),
    ("src/step.test.ts", include_str!("templates/ts/step.test.ts.tmpl")),
    ("README.md", include_str!("templates/ts/README.md.tmpl")),
];

const JS: &[File] = &[
    ("package.json", include_str!("templates/js/package.json.tmpl")),
    (".npmrc", include_str!("templates/ts/npmrc.tmpl")),
    (".gitignore", include_str!("templates/ts/gitignore.tmpl")),
    ("src/step.js", include_str!("templates/js/step.js.tmpl")),
    ("src/step.test.js", include_str!("templates/js/step.test.js.tmpl")),
    ("README.md", include_str!("templates/js/README.md.tmpl")),
];

const PYTHON: &[File] = &[
    ("pyproject.toml", include_str!("templates/python/pyproject.toml.tmpl")),
    (".gitignore", include_str!("templates/python/gitignore.tmpl")),
    ("{{ident}}.py", include_str!("templates/python/step.py.tmpl")),
    ("test_{{ident}}.py", include_str!("templates/python/test_step.py.tmpl")),
    ("README.md", include_str!("templates/python/README.md.tmpl")),
];

const RUST: &[File] = &[
    ("Cargo.toml", include_str!("templates/rust/Cargo.toml.tmpl")),
    (".gitignore", include_str!("templates/rust/gitignore.tmpl")),
    ("src/lib.rs", include_str!("templates/rust/lib.rs.tmpl")),
    ("README.md", include_str!("templates/rust/README.md.tmpl")),
];

const C: &[File] = &[
    ("step.c", include_str!("templates/c/step.c.tmpl")),
    ("test.sh", include_str!("templates/c/test.sh.tmpl")),
    (".gitignore", include_str!("templates/c/gitignore.tmpl")),
    ("README.md", include_str!("templates/c/README.md.tmpl")),
];

pub fn run(lang: Lang, name: &str, sdk: &Sdk) -> anyhow::Result<Exit> {
    check_name(name).map_err(bad)?;
    let dir = PathBuf::from(name);
    if dir.exists() {
        return Err(bad(anyhow::anyhow!(
            "{} already exists: `weft guest new` makes a fresh folder; pick another name or remove it",
            dir.display()
        )));
    }
    let vars = Vars::new(name, sdk);
    let files = match lang {
        Lang::Ts => TS,
        Lang::Js => JS,
        Lang::Python => PYTHON,
        Lang::Rust => RUST,
        Lang::C => C,
    };
    // Written into a temporary sibling, then renamed: a failure leaves nothing.
    let tmp = PathBuf::from(format!(".{name}.weft-new-{}", std::process::id()));
    let written = write_all(&tmp, files, &vars, lang, sdk);
    let done =
        written.and_then(|()| std::fs::rename(&tmp, &dir).with_context(|| format!("cannot create {}", dir.display())));
    if let Err(e) = done {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    let abs = std::fs::canonicalize(&dir).unwrap_or(dir);
    eprintln!("created a {} step `{name}` in {}", lang.name(), abs.display());
    eprintln!("next: cd {name} && {}", next_steps(lang));
    outln!("{}", abs.display());
    Ok(Exit::Success)
}

fn next_steps(lang: Lang) -> &'static str {
    match lang {
        Lang::Ts | Lang::Js => "npm install && npm test && weft guest build",
        Lang::Python | Lang::Rust | Lang::C => "weft guest test && weft guest build",
    }
}

fn write_all(dir: &Path, files: &[File], vars: &Vars, lang: Lang, sdk: &Sdk) -> anyhow::Result<()> {
    for (path, text) in files {
        let file = dir.join(vars.fill(path));
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&file, vars.fill(text)).with_context(|| format!("cannot write {}", file.display()))?;
    }
    if lang == Lang::Rust {
        // The checkout's toolchain (with the wasm targets) and its locked
        // versions, so the step builds with what the SDK was tested with.
        for copied in ["rust-toolchain.toml", "Cargo.lock"] {
            let from = sdk.root.join(copied);
            if from.is_file() {
                std::fs::copy(&from, dir.join(copied)).with_context(|| format!("cannot copy {}", from.display()))?;
            }
        }
    }
    Ok(())
}

/// A step name: lower case letters, digits and `-`, starting with a letter.
fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && name.len() <= 64;
    if ok {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "`{name}` is not a step name: use lower case letters, digits and `-`, starting with a letter (such as `hello` or `order-total`)"
        ))
    }
}

/// What the templates' `{{...}}` placeholders stand for.
struct Vars {
    /// `order-total`
    name: String,
    /// `order_total`: a Python module or Rust crate name.
    ident: String,
    /// `OrderTotal`: a class name.
    camel: String,
    /// The weft checkout, absolute.
    sdk: String,
}

impl Vars {
    fn new(name: &str, sdk: &Sdk) -> Vars {
        let camel = name
            .split('-')
            .map(|w| {
                let mut c = w.chars();
                c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
            })
            .collect();
        Vars { name: name.to_string(), ident: name.replace('-', "_"), camel, sdk: sdk.root.display().to_string() }
    }

    fn fill(&self, text: &str) -> String {
        text.replace("{{name}}", &self.name)
            .replace("{{ident}}", &self.ident)
            .replace("{{camel}}", &self.camel)
            .replace("{{sdk}}", &self.sdk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["hello", "order-total", "a1"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "Hello", "1a", "a_b", "a-", "a b", "../x"] {
            let e = check_name(bad).unwrap_err().to_string();
            assert!(e.contains("not a step name"), "{bad}: {e}");
        }
    }

    #[test]
    fn placeholders_are_filled() {
        let v = Vars::new("order-total", &Sdk { root: PathBuf::from("/w") });
        assert_eq!(v.fill("{{name}} {{ident}} {{camel}} {{sdk}}/x"), "order-total order_total OrderTotal /w/x");
        // Every template's placeholders are known ones.
        for (path, text) in TS.iter().chain(JS).chain(PYTHON).chain(RUST).chain(C) {
            let filled = v.fill(text);
            assert!(!filled.contains("{{"), "{path}: an unknown placeholder is left in\n{filled}");
        }
    }
}
