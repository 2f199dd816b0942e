//! The wiring of hosts that run loopx themselves: Claude Code (.mcp.json, a SessionStart hook,
//! the server enabled and its tools allowed) and Codex CLI (an AGENTS.md section, .codex/config.toml).

use serde_json::{Map, json};

use super::files;
use super::json::{Node, Obj};
use super::refuse;
use super::{Plan, Wiring};
use crate::cli::prompt::{self, Runtime};
use crate::kernel::Result;
use crate::text::sh_word;

/// The mark at the end of the hook command `setup claude` writes, so a rerun finds its own.
const HOOK_MARK: &str = "# loopx-setup";

/// The start and end of the AGENTS.md section `setup codex` writes.
const BEGIN: &str = "<!-- loopx:begin -->";
const END: &str = "<!-- loopx:end -->";

/// Claude Code: the MCP server in .mcp.json; a SessionStart hook, the server enabled and its
/// tools allowed in .claude/settings.json.
pub fn claude(p: &Plan) -> Result<Wiring> {
    let mcp = files::merge_json(&p.root, ".mcp.json", |m| {
        let servers = m.object("mcpServers", ".mcp.json")?;
        server_entry(servers, ".mcp.json", p)
    })?;
    let settings = files::merge_json(&p.root, ".claude/settings.json", |m| {
        session_hook(m, &hook_command(p))?;
        allow_and_enable(m)
    })?;
    Ok(Wiring {
        changes: vec![mcp, settings],
        next: format!(
            "the project MCP server `loopx` is enabled (`enabledMcpjsonServers`) and its tools \
             allowed (`{ALLOW_RULE}` in `permissions.allow`, so `claude -p` may call them); \
             Claude Code applies a project's settings once you trust its folder: start \
             `claude` here once and accept; each session then starts with the loopx packet"
        ),
        extra: Map::new(),
    })
}

/// The permission rule that allows every tool of the `loopx` server: headless `claude -p`
/// refuses a tool no rule allows.
const ALLOW_RULE: &str = "mcp__loopx";

/// Adds our rule to `permissions.allow` and `loopx` to `enabledMcpjsonServers`, each once; the
/// user's other rules and servers stay.
fn allow_and_enable(m: &mut Obj) -> Result<()> {
    const REL: &str = ".claude/settings.json";
    add_once(
        m.object("permissions", REL)?.array("allow", REL)?,
        ALLOW_RULE,
    );
    add_once(m.array("enabledMcpjsonServers", REL)?, "loopx");
    Ok(())
}

/// Appends the string `item` to `list` unless it is there.
fn add_once(list: &mut Vec<Node>, item: &str) {
    if !list.iter().any(|n| n.value() == json!(item)) {
        list.push(Node::New(json!(item)));
    }
}

/// Sets `loopx` in `mcpServers`, key by key: the user's other keys in it (a timeout, more
/// environment) stay.
fn server_entry(servers: &mut Obj, rel: &str, p: &Plan) -> Result<()> {
    let entry = servers.object("loopx", rel)?;
    entry.set("command", json!(p.bin));
    entry.set("args", json!(["mcp"]));
    entry.object("env", rel)?.set("LOOPX_AGENT", json!(p.agent));
    Ok(())
}

/// The SessionStart hook's command: the packet for this agent, printed into Claude's context.
fn hook_command(p: &Plan) -> String {
    format!(
        "{} --agent {} --dir \"$CLAUDE_PROJECT_DIR\" refresh-state {HOOK_MARK}",
        sh_word(&p.bin),
        sh_word(&p.agent)
    )
}

/// Puts our matcher group in `hooks.SessionStart`: replaces the one a former setup wrote (found
/// by its mark), else appends; the user's groups stay as they are.
fn session_hook(m: &mut Obj, command: &str) -> Result<()> {
    const REL: &str = ".claude/settings.json";
    let list = m.object("hooks", REL)?.array("SessionStart", REL)?;
    let ours = json!({
        "matcher": "startup|resume|clear|compact",
        "hooks": [{"type": "command", "command": command, "timeout": 30}]
    });
    let is_ours = |g: &Node| {
        g.value()["hooks"].as_array().is_some_and(|hs| {
            hs.iter().any(|h| {
                h["command"]
                    .as_str()
                    .is_some_and(|c| c.ends_with(HOOK_MARK))
            })
        })
    };
    match list.iter().position(is_ours) {
        Some(i) => {
            list[i] = Node::New(ours);
            // Ours once: a second group of ours (an old copy) goes.
            let mut first = true;
            list.retain(|g| !is_ours(g) || std::mem::replace(&mut first, false));
        }
        None => list.push(Node::New(ours)),
    }
    Ok(())
}

/// Codex CLI: the agent prompt in AGENTS.md between markers, and the MCP server in
/// .codex/config.toml.
pub fn codex(p: &Plan) -> Result<Wiring> {
    let agents = agents_md(p)?;
    let config = codex_config(p)?;
    Ok(Wiring {
        changes: vec![agents, config],
        next: format!(
            "trust this project in Codex, which reads .codex/config.toml only in a trusted \
             project: run `codex` here once and accept, or add `[projects.{}]` with \
             `trust_level = \"trusted\"` to ~/.codex/config.toml; `codex mcp list` then shows \
             `loopx` (`codex exec` also needs a git repository)",
            toml::Value::String(p.root.display().to_string())
        ),
        extra: Map::new(),
    })
}

/// AGENTS.md with the codex prompt between the markers: replaced in place, else appended.
fn agents_md(p: &Plan) -> Result<super::Change> {
    const REL: &str = "AGENTS.md";
    let old = files::read(&p.root, REL)?;
    let section = format!(
        "{BEGIN}\n<!-- Written by `loopx setup codex`; rerun it to update this section. -->\n\
         ## loopx (agent `{agent}`)\n\nYou are agent `{agent}`: add `--agent {agent}` to each \
         command below, or export `LOOPX_AGENT={agent}`.\n{}\n{END}",
        prompt::text(Runtime::Codex),
        agent = p.agent,
    );
    let text = match &old {
        None => format!("{section}\n"),
        Some(bytes) => with_section(REL, &files::utf8(REL, bytes.clone())?, &section)?,
    };
    let same = old.as_deref() == Some(text.as_bytes());
    Ok(files::change(REL, old, text.into_bytes(), same))
}

/// The text with the marked section replaced, or appended after a blank line.
fn with_section(rel: &str, text: &str, section: &str) -> Result<String> {
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    let begins: Vec<usize> = text.match_indices(BEGIN).map(|(i, _)| i).collect();
    let ends: Vec<usize> = text.match_indices(END).map(|(i, _)| i).collect();
    match (begins.as_slice(), ends.as_slice()) {
        ([], []) => {
            let sep = if text.is_empty() || text.ends_with("\n\n") {
                ""
            } else if text.ends_with('\n') {
                "\n"
            } else {
                "\n\n"
            };
            Ok(format!("{text}{sep}{section}\n"))
        }
        ([b], [e]) if b < e => Ok(format!(
            "{}{section}{}",
            &text[..*b],
            &text[*e + END.len()..]
        )),
        ([b, ..], [e, ..]) if e < b => Err(refuse(
            rel,
            Some(line_of(*e)),
            format!("`{END}` comes before `{BEGIN}`"),
        )),
        ([_, b2, ..], _) => Err(refuse(
            rel,
            Some(line_of(*b2)),
            format!("`{BEGIN}` is there twice"),
        )),
        (_, [_, e2, ..]) => Err(refuse(
            rel,
            Some(line_of(*e2)),
            format!("`{END}` is there twice"),
        )),
        ([b], []) => Err(refuse(
            rel,
            Some(line_of(*b)),
            format!("`{BEGIN}` has no `{END}`"),
        )),
        (_, e) => Err(refuse(
            rel,
            e.first().map(|e| line_of(*e)),
            format!("`{END}` has no `{BEGIN}`"),
        )),
    }
}

/// `.codex/config.toml` with `[mcp_servers.loopx]`, merged with toml_edit: comments, other
/// servers and other keys of ours stay.
fn codex_config(p: &Plan) -> Result<super::Change> {
    const REL: &str = ".codex/config.toml";
    let old = files::read(&p.root, REL)?;
    let text = match &old {
        None => String::new(),
        Some(bytes) => files::utf8(REL, bytes.clone())?,
    };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        let line = e.span().map(|s| text[..s.start].matches('\n').count() + 1);
        refuse(REL, line, format!("is not TOML: {}", e.message()))
    })?;
    let before = doc.to_string();
    set_server(&mut doc, REL, p)?;
    let after = doc.to_string();
    let same = toml_value(&before) == toml_value(&after);
    let new = if old.is_none() {
        format!(
            "# MCP servers for Codex CLI in this project.\n{}",
            after.trim_start()
        )
    } else {
        after
    };
    Ok(files::change(REL, old, new.into_bytes(), same))
}

/// Sets command, args and env.LOOPX_AGENT of `[mcp_servers.loopx]`.
fn set_server(doc: &mut toml_edit::DocumentMut, rel: &str, p: &Plan) -> Result<()> {
    use toml_edit::{Item, Table, value};
    let not_table = |what: &str| refuse(rel, None, format!("`{what}` is not a table"));
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_like_mut()
        .ok_or_else(|| not_table("mcp_servers"))?;
    let ours = servers
        .entry("loopx")
        .or_insert(Item::Table(Table::new()))
        .as_table_like_mut()
        .ok_or_else(|| not_table("mcp_servers.loopx"))?;
    ours.insert("command", value(p.bin.as_str()));
    ours.insert("args", value(toml_edit::Array::from_iter(["mcp"])));
    let env = ours
        .entry("env")
        .or_insert_with(|| value(toml_edit::InlineTable::new()))
        .as_table_like_mut()
        .ok_or_else(|| not_table("mcp_servers.loopx.env"))?;
    env.insert("LOOPX_AGENT", value(p.agent.as_str()));
    Ok(())
}

/// A TOML text's value, to tell a real change from formatting.
fn toml_value(text: &str) -> Option<toml::Table> {
    text.parse().ok()
}
