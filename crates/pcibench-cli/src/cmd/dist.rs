//! What packagers generate from the clap definitions at build time (dist/build-deb, docs/packaging.md):
//! shell completions and one man page per command. Hidden commands: they are
//! build steps, not something a user of the tool types.

use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Shell,
}

#[derive(Args)]
pub struct ManArgs {
    /// The directory to write pcibench.1 and pcibench-COMMAND.1 into (created if missing).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

/// The command without its hidden subcommands (clap_complete offers hidden subcommands too).
fn visible(cmd: &clap::Command) -> clap::Command {
    let mut c =
        clap::Command::new(cmd.get_name().to_string()).version(cmd.get_version().unwrap_or_default().to_string());
    if let Some(about) = cmd.get_about() {
        c = c.about(about.clone());
    }
    for arg in cmd.get_arguments() {
        c = c.arg(arg.clone());
    }
    c.subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

/// The completion script for `a.shell` on stdout.
pub fn completions(cmd: clap::Command, a: CompletionsArgs) -> anyhow::Result<ExitCode> {
    use clap_complete::{generate, shells};
    let mut cmd = visible(&cmd);
    let mut out = Vec::new();
    match a.shell {
        Shell::Bash => generate(shells::Bash, &mut cmd, "pcibench", &mut out),
        Shell::Zsh => generate(shells::Zsh, &mut cmd, "pcibench", &mut out),
        Shell::Fish => generate(shells::Fish, &mut cmd, "pcibench", &mut out),
    }
    super::emit(&String::from_utf8_lossy(&out));
    Ok(ExitCode::SUCCESS)
}

/// pcibench.1 and one page per visible command (pcibench-health.1, ...), as git and cargo ship theirs.
pub fn man(mut cmd: clap::Command, a: ManArgs) -> anyhow::Result<ExitCode> {
    // Through the one writer (as the invoking user under sudo; never through a link).
    pcibench::file::create_dir_all(&a.dir)?;
    cmd.build();
    let write = |name: &str, page: clap::Command| -> anyhow::Result<()> {
        let mut buf = Vec::new();
        clap_mangen::Man::new(page).render(&mut buf)?;
        let path = a.dir.join(format!("{name}.1"));
        pcibench::file::Destination::check("man", "pcibench.1", &path)?.write(&buf)?;
        Ok(())
    };
    let version = cmd.get_version().unwrap_or_default().to_string();
    // clap's own `help` command is not one of pcibench's.
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        let name = format!("pcibench-{}", sub.get_name());
        write(&name, sub.clone().name(name.clone()).version(version.clone()))?;
    }
    write("pcibench", cmd)?;
    Ok(ExitCode::SUCCESS)
}
