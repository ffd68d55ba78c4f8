//! docs/operations.md's flag tables are rendered from the flags' clap
//! definitions (the text `--help` prints), one table per subcommand between
//! `<!-- flags of NAME -->` and `<!-- end flags of NAME -->`. A table that
//! disagrees fails here; to rewrite them after changing a flag, then review
//! the diff:
//!
//! ```sh
//! REGENERATE_FLAG_DOCS=1 cargo test --test cli flag_docs::
//! git diff docs/operations.md
//! ```

use clap::{ArgAction, Args, Command};
use kserve_injector::cli::{
    AuditArgs, CertsArgs, CheckArgs, DefaultConfigArgs, MutateArgs, PolicyArgs,
};
use kserve_injector::server::args::ServeArgs;
use std::path::Path;

fn subcommands() -> Vec<(&'static str, Command)> {
    vec![
        ("mutate", MutateArgs::augment_args(Command::new("mutate"))),
        ("serve", ServeArgs::augment_args(Command::new("serve"))),
        ("audit", AuditArgs::augment_args(Command::new("audit"))),
        ("certs", CertsArgs::augment_args(Command::new("certs"))),
        ("check", CheckArgs::augment_args(Command::new("check"))),
        (
            "default-config",
            DefaultConfigArgs::augment_args(Command::new("default-config")),
        ),
        ("policy", PolicyArgs::augment_args(Command::new("policy"))),
    ]
}

/// Text for one table cell: one line, `|` escaped.
fn cell(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    words.join(" ").replace('|', "\\|")
}

/// The Markdown table of `command`'s flags: flag, default, environment
/// variable (when any flag has one), and the help text.
fn render(command: &Command) -> String {
    let args: Vec<_> = command
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .collect();
    let with_env = args.iter().any(|a| a.get_env().is_some());
    let mut out = String::from(if with_env {
        "| Flag | Default | Environment | What |\n|---|---|---|---|\n"
    } else {
        "| Flag | Default | What |\n|---|---|---|\n"
    });
    for arg in args {
        let name = match (arg.get_short(), arg.get_long()) {
            (Some(s), Some(l)) => format!("`-{s}`, `--{l}`"),
            (None, Some(l)) => format!("`--{l}`"),
            (Some(s), None) => format!("`-{s}`"),
            (None, None) => {
                let value = arg.get_value_names().and_then(|v| v.first().cloned());
                format!("`{}`", value.map(|v| v.to_string()).unwrap_or_default())
            }
        };
        let defaults: Vec<String> = (arg.get_default_values().iter())
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let default = match arg.get_action() {
            ArgAction::SetTrue if defaults.is_empty() => "off".to_string(),
            _ if defaults.is_empty() => "none".to_string(),
            _ => format!("`{}`", defaults.join(",")),
        };
        let help = arg.get_long_help().or(arg.get_help());
        let help = help.map(|h| cell(&h.to_string())).unwrap_or_default();
        let env = arg.get_env().map(|e| format!("`{}`", e.to_string_lossy()));
        match (with_env, env) {
            (true, env) => {
                out += &format!(
                    "| {name} | {default} | {} | {help} |\n",
                    env.unwrap_or_else(|| "none".into())
                )
            }
            (false, _) => out += &format!("| {name} | {default} | {help} |\n"),
        }
    }
    out
}

/// `docs` with each subcommand's table replaced by its rendering.
fn rendered_docs(docs: &str) -> Result<String, String> {
    let mut docs = docs.to_string();
    for (name, command) in subcommands() {
        let (start, end) = (
            format!("<!-- flags of {name} -->\n"),
            format!("<!-- end flags of {name} -->"),
        );
        let from = docs.find(&start).ok_or(format!("no {start:?} marker"))? + start.len();
        let to = from
            + docs[from..]
                .find(&end)
                .ok_or(format!("no {end:?} marker"))?;
        docs.replace_range(from..to, &render(&command));
    }
    Ok(docs)
}

#[test]
fn operations_md_flag_tables_are_the_flags_help() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md");
    let docs = std::fs::read_to_string(&path).expect("read docs/operations.md");
    let want = rendered_docs(&docs).expect("docs/operations.md has every flag table's markers");
    if std::env::var_os("REGENERATE_FLAG_DOCS").is_some_and(|v| v != "0") {
        std::fs::write(&path, &want).expect("write docs/operations.md");
        return;
    }
    if docs != want {
        let diff = (docs.lines().zip(want.lines()))
            .find(|(have, want)| have != want)
            .map(|(have, want)| format!("\n  docs: {have}\n  clap: {want}"))
            .unwrap_or_default();
        panic!(
            "docs/operations.md's flag tables disagree with the flags' help{diff}\n\
             (REGENERATE_FLAG_DOCS=1 cargo test --test cli flag_docs:: rewrites them)"
        );
    }
}

#[test]
fn a_changed_help_text_is_found() {
    let docs = "<!-- flags of mutate -->\n| stale |\n<!-- end flags of mutate -->\n\
                <!-- flags of serve -->\n<!-- end flags of serve -->\n\
                <!-- flags of audit -->\n<!-- end flags of audit -->\n\
                <!-- flags of certs -->\n<!-- end flags of certs -->\n\
                <!-- flags of check -->\n<!-- end flags of check -->\n\
                <!-- flags of default-config -->\n<!-- end flags of default-config -->\n\
                <!-- flags of policy -->\n<!-- end flags of policy -->\n";
    let rendered = rendered_docs(docs).expect("markers found");
    assert!(!rendered.contains("| stale |"));
    assert!(rendered.contains("| `--max-document-bytes` | `67108864` |"));
    assert!(rendered.contains("| `--addr` | none | `KSERVE_INJECTOR_ADDR` |"));
    assert!(rendered.contains("| `--new-ca` | off | Make a new CA"));
    assert_eq!(
        rendered_docs("no markers").unwrap_err(),
        "no \"<!-- flags of mutate -->\\n\" marker"
    );
}

/// The five flags that say how pods are mutated are declared once
/// (`src/input_flags.rs`) and reach every subcommand that mutates or
/// compares pods; a subcommand that words one differently overrides its
/// help (`mut_arg`), never redeclares it.
#[test]
fn the_mutation_flags_are_declared_once_and_reach_each_subcommand() {
    const FLAGS: [&str; 5] = [
        "config",
        "config_file",
        "modelcar_mode",
        "kserve_version",
        "security_profile",
    ];
    let declared = regex::Regex::new(
        r"(?s)#\[arg\(.*?\)\]\s*pub (config|config_file|modelcar_mode|kserve_version|security_profile):",
    )
    .unwrap();
    let mut found: Vec<(String, String)> = Vec::new();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let file = path.strip_prefix(&src).unwrap().display().to_string();
                for m in declared.captures_iter(&text) {
                    found.push((m[1].to_string(), file.clone()));
                }
            }
        }
    }
    for flag in FLAGS {
        let places: Vec<&str> = (found.iter())
            .filter(|(f, _)| f == flag)
            .map(|(_, file)| file.as_str())
            .collect();
        assert_eq!(
            places,
            ["input_flags.rs"],
            "--{flag} is declared in {places:?}"
        );
    }
    for (name, mut command) in subcommands() {
        let help = command.render_long_help().to_string();
        let wanted: &[&str] = match name {
            "serve" | "mutate" | "audit" | "policy" => &FLAGS,
            "default-config" => &["kserve_version"],
            _ => &[],
        };
        for flag in wanted {
            let long = format!("--{} ", flag.replace('_', "-"));
            assert!(help.contains(&long), "{name} --help has no {long}");
        }
    }
}
