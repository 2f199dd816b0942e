//! The one keymap: it drives key handling, the generated help overlay and the key-hint bar.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What a key asks the board to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Intent {
    /// Leave the board.
    Quit,
    /// Suspend to the shell (Ctrl-Z).
    Suspend,
    /// Show or hide the help overlay.
    Help,
    /// Focus the next pane.
    NextPane,
    /// Focus the previous pane.
    PrevPane,
    /// Move the selection up.
    Up,
    /// Move the selection down.
    Down,
    /// The column to the left.
    Left,
    /// The column to the right.
    Right,
    /// A page up.
    PageUp,
    /// A page down.
    PageDown,
    /// The first row.
    Top,
    /// The last row.
    Bottom,
    /// Open the detail view of the selection.
    Open,
    /// Start typing a filter.
    Filter,
    /// Close what is open, or clear the filter.
    Back,
    /// Reload every file now.
    Reload,
    /// Approve the selected gate.
    Approve,
    /// Reject the selected gate, with a reason.
    Reject,
    /// Move the selected todo's lease to another agent.
    Reassign,
    /// Release the selected todo's lease.
    Release,
    /// Pause the goal, or resume it.
    TogglePause,
    /// Add a todo.
    AddTodo,
    /// Yes: do the action asked about.
    Confirm,
    /// No: do nothing.
    Cancel,
    /// Finish the text or the choice.
    Submit,
    /// Show the agents' roster.
    Agents,
    /// Select the next pending gate, from any pane.
    NextGate,
    /// Copy the selected gate's or todo's id to the clipboard (OSC 52).
    Copy,
    /// The next sort order of the todo columns.
    Sort,
    /// Relative times or clock times.
    Times,
    /// Show every file error in full.
    Errors,
    /// Open a broken file in `$EDITOR`.
    Edit,
    /// Type or change the reason of a gate decision (in the confirm dialog).
    EditReason,
    /// List the stale agents too (in the reassign picker).
    ShowAll,
    /// Delete the character before the cursor.
    Erase,
    /// Delete the character at the cursor.
    EraseForward,
    /// Open the metric chart.
    Metrics,
    /// Best is the highest value, or the lowest (in the metric chart).
    FlipBest,
    /// The selected todo's metrics, or the whole goal's (in the metric chart).
    MetricScope,
    /// Pair a phone for `loopx web`: its QR code, then its fingerprint to confirm.
    Pair,
}

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// In every mode, even in dialogs.
    Always,
    /// On the board, whatever pane has focus.
    Global,
    /// On the board with the gates pane focused.
    Gates,
    /// On the board with the todos pane focused.
    Todos,
    /// In the confirm dialog.
    Confirm,
    /// In a text input (reason, title, filter).
    Input,
    /// In a picker (agent, option).
    Picker,
    /// In the help overlay or the detail view.
    Overlay,
    /// In the detail view of a gate or a todo.
    Detail,
    /// In the reassign picker (typing goes to the agent id).
    AgentPicker,
    /// In the file-errors overlay.
    Errors,
    /// In the metric chart.
    Chart,
    /// In the pair-a-phone dialog.
    Pair,
}

impl Scope {
    /// The heading of this scope in the help overlay.
    pub fn title(self) -> &'static str {
        match self {
            Scope::Always => "Anywhere",
            Scope::Global => "Board",
            Scope::Gates => "Gates pane",
            Scope::Todos => "Todos pane",
            Scope::Confirm => "Confirm dialog",
            Scope::Input => "Text input",
            Scope::Picker => "Picker",
            Scope::Overlay => "Help and detail view",
            Scope::Detail => "Detail view",
            Scope::AgentPicker => "Reassign picker (type an agent id to filter or use it)",
            Scope::Errors => "File errors",
            Scope::Chart => "Metric chart",
            Scope::Pair => "Pair a phone",
        }
    }
}

/// A key and its modifiers (Shift is ignored for characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// The key.
    pub code: KeyCode,
    /// Control or Alt.
    pub mods: KeyModifiers,
}

const fn k(c: char) -> Key {
    Key {
        code: KeyCode::Char(c),
        mods: KeyModifiers::NONE,
    }
}

const fn ctrl(c: char) -> Key {
    Key {
        code: KeyCode::Char(c),
        mods: KeyModifiers::CONTROL,
    }
}

const fn code(code: KeyCode) -> Key {
    Key {
        code,
        mods: KeyModifiers::NONE,
    }
}

/// One row of the keymap.
#[derive(Debug, Clone, Copy)]
pub struct Binding {
    /// Where it applies.
    pub scope: Scope,
    /// The keys, the first shown in hints.
    pub keys: &'static [Key],
    /// What it does.
    pub intent: Intent,
    /// A line for the help overlay.
    pub help: &'static str,
    /// A word for the key-hint bar, if it belongs there.
    pub hint: Option<&'static str>,
    /// True for owner actions that change state (hidden with `--readonly`).
    pub changes: bool,
}

const fn b(
    scope: Scope,
    keys: &'static [Key],
    intent: Intent,
    help: &'static str,
    hint: Option<&'static str>,
    changes: bool,
) -> Binding {
    Binding {
        scope,
        keys,
        intent,
        help,
        hint,
        changes,
    }
}

/// The keymap, in help order.
#[rustfmt::skip]
pub const KEYMAP: &[Binding] = &[
    b(Scope::Always, &[ctrl('c')], Intent::Quit, "quit the board", None, false),
    b(Scope::Always, &[ctrl('z')], Intent::Suspend, "suspend to the shell (fg to come back)", None, false),
    b(Scope::Global, &[k('q')], Intent::Quit, "quit", Some("quit"), false),
    b(Scope::Global, &[k('?')], Intent::Help, "this help", Some("help"), false),
    b(Scope::Global, &[code(KeyCode::Tab)], Intent::NextPane, "focus the next pane (or click it)", Some("pane"), false),
    b(Scope::Global, &[code(KeyCode::BackTab)], Intent::PrevPane, "focus the previous pane", None, false),
    b(Scope::Global, &[code(KeyCode::Down), k('j')], Intent::Down, "move down (or the mouse wheel)", None, false),
    b(Scope::Global, &[code(KeyCode::Up), k('k')], Intent::Up, "move up", None, false),
    b(Scope::Global, &[code(KeyCode::PageDown), ctrl('d')], Intent::PageDown, "a page down", None, false),
    b(Scope::Global, &[code(KeyCode::PageUp), ctrl('u')], Intent::PageUp, "a page up", None, false),
    b(Scope::Global, &[code(KeyCode::Home), k('g')], Intent::Top, "the first row", None, false),
    b(Scope::Global, &[code(KeyCode::End), k('G')], Intent::Bottom, "the last row", None, false),
    b(Scope::Global, &[code(KeyCode::Enter)], Intent::Open, "details of the selection", Some("details"), false),
    b(Scope::Global, &[k('w')], Intent::Agents, "the agents: working, idle or stale", None, false),
    b(Scope::Global, &[k('m')], Intent::Metrics, "metric chart of the todo, or the goal", None, false),
    b(Scope::Global, &[k('/')], Intent::Filter, "filter todos and gates by text", Some("filter"), false),
    b(Scope::Global, &[code(KeyCode::Esc)], Intent::Back, "clear the filter or the message", None, false),
    b(Scope::Global, &[ctrl('r')], Intent::Reload, "reload every file now", None, false),
    b(Scope::Global, &[k('N')], Intent::NextGate, "the next pending gate, from any pane", None, false),
    b(Scope::Global, &[k('y')], Intent::Copy, "copy the selected id (OSC 52 clipboard)", None, false),
    b(Scope::Global, &[k('t')], Intent::Times, "relative times or clock times (UTC)", None, false),
    b(Scope::Global, &[k('e')], Intent::Errors, "file errors in full: file, line, message", None, false),
    b(Scope::Global, &[k('E')], Intent::Edit, "edit the broken file in $EDITOR, reload", None, true),
    b(Scope::Global, &[k('p')], Intent::TogglePause, "pause or resume the goal", Some("pause"), true),
    b(Scope::Global, &[k('n')], Intent::AddTodo, "add a todo", Some("add"), true),
    b(Scope::Global, &[k('P')], Intent::Pair, "pair a phone for loopx web (QR code)", Some("pair"), true),
    b(Scope::Gates, &[k('a')], Intent::Approve, "approve the selected gate", Some("approve"), true),
    b(Scope::Gates, &[k('x')], Intent::Reject, "reject the selected gate (asks a reason)", Some("reject"), true),
    b(Scope::Todos, &[code(KeyCode::Left), k('h')], Intent::Left, "the column to the left", None, false),
    b(Scope::Todos, &[code(KeyCode::Right), k('l')], Intent::Right, "the column to the right", Some("column"), false),
    b(Scope::Todos, &[k('r')], Intent::Reassign, "reassign the lease to an agent", Some("reassign"), true),
    b(Scope::Todos, &[k('u')], Intent::Release, "release the lease", Some("release"), true),
    b(Scope::Todos, &[k('s')], Intent::Sort, "sort: pick order, priority, age, holder", None, false),
    b(Scope::Detail, &[k('a')], Intent::Approve, "approve the gate shown", None, true),
    b(Scope::Detail, &[k('x')], Intent::Reject, "reject the gate shown (asks a reason)", None, true),
    b(Scope::Detail, &[k('r')], Intent::Reassign, "reassign the todo shown", None, true),
    b(Scope::Detail, &[k('u')], Intent::Release, "release the todo's lease", None, true),
    b(Scope::Detail, &[k('y')], Intent::Copy, "copy the id shown (OSC 52)", None, false),
    b(Scope::Detail, &[k('N')], Intent::NextGate, "the next pending gate", None, false),
    b(Scope::Confirm, &[k('y'), code(KeyCode::Enter)], Intent::Confirm, "do it", Some("yes"), false),
    b(Scope::Confirm, &[k('n'), code(KeyCode::Esc)], Intent::Cancel, "do nothing", Some("no"), false),
    b(Scope::Confirm, &[k('r')], Intent::EditReason, "a reason (optional on approve)", Some("reason"), false),
    b(Scope::Confirm, &[code(KeyCode::Down), k('j')], Intent::Down, "scroll the gate's action down", None, false),
    b(Scope::Confirm, &[code(KeyCode::Up), k('k')], Intent::Up, "scroll the gate's action up", None, false),
    b(Scope::Input, &[code(KeyCode::Enter)], Intent::Submit, "on to the confirm (a filter: keep it)", Some("next"), false),
    b(Scope::Input, &[code(KeyCode::Esc)], Intent::Cancel, "cancel (the text is kept for next time)", Some("cancel"), false),
    b(Scope::Input, &[code(KeyCode::Left)], Intent::Left, "move the cursor left", None, false),
    b(Scope::Input, &[code(KeyCode::Right)], Intent::Right, "move the cursor right", None, false),
    b(Scope::Input, &[code(KeyCode::Home), ctrl('a')], Intent::Top, "to the start", None, false),
    b(Scope::Input, &[code(KeyCode::End), ctrl('e')], Intent::Bottom, "to the end", None, false),
    b(Scope::Input, &[code(KeyCode::Backspace)], Intent::Erase, "delete before the cursor", None, false),
    b(Scope::Input, &[code(KeyCode::Delete)], Intent::EraseForward, "delete at the cursor", None, false),
    b(Scope::Picker, &[code(KeyCode::Down), k('j')], Intent::Down, "next choice", None, false),
    b(Scope::Picker, &[code(KeyCode::Up), k('k')], Intent::Up, "previous choice", None, false),
    b(Scope::Picker, &[code(KeyCode::Enter)], Intent::Submit, "choose", Some("choose"), false),
    b(Scope::Picker, &[code(KeyCode::Esc)], Intent::Cancel, "cancel", Some("cancel"), false),
    b(Scope::AgentPicker, &[code(KeyCode::Down)], Intent::Down, "next agent", None, false),
    b(Scope::AgentPicker, &[code(KeyCode::Up)], Intent::Up, "previous agent", None, false),
    b(Scope::AgentPicker, &[code(KeyCode::Enter)], Intent::Submit, "choose; a typed id is checked as --agent", Some("choose"), false),
    b(Scope::AgentPicker, &[code(KeyCode::Tab)], Intent::ShowAll, "list stale and never-seen agents too", Some("stale"), false),
    b(Scope::AgentPicker, &[code(KeyCode::Backspace)], Intent::Erase, "delete a typed character", None, false),
    b(Scope::AgentPicker, &[code(KeyCode::Esc)], Intent::Cancel, "cancel", Some("cancel"), false),
    b(Scope::Errors, &[code(KeyCode::Down), k('j')], Intent::Down, "next error", None, false),
    b(Scope::Errors, &[code(KeyCode::Up), k('k')], Intent::Up, "previous error", None, false),
    b(Scope::Errors, &[k('E'), code(KeyCode::Enter)], Intent::Edit, "edit its file in $EDITOR, reload", Some("edit"), true),
    b(Scope::Errors, &[code(KeyCode::Esc), k('q'), k('e')], Intent::Back, "close", Some("close"), false),
    b(Scope::Chart, &[code(KeyCode::Tab), code(KeyCode::Right), k('l')], Intent::Right, "the next metric", Some("metric"), false),
    b(Scope::Chart, &[code(KeyCode::BackTab), code(KeyCode::Left), k('h')], Intent::Left, "the previous metric", None, false),
    b(Scope::Chart, &[k('b')], Intent::FlipBest, "best is the highest value or the lowest", Some("best"), false),
    b(Scope::Chart, &[k('g')], Intent::MetricScope, "the selected todo's or the goal's points", Some("todo/goal"), false),
    b(Scope::Chart, &[code(KeyCode::Esc), k('q'), k('m')], Intent::Back, "close", Some("close"), false),
    b(Scope::Pair, &[k('y')], Intent::Confirm, "enroll the phone's key (same fingerprint)", Some("enroll"), false),
    b(Scope::Pair, &[k('n')], Intent::Cancel, "decline the phone's key", Some("decline"), false),
    b(Scope::Pair, &[code(KeyCode::Esc)], Intent::Back, "close; the URL stops working, a key sent is declined", Some("close"), false),
    b(Scope::Overlay, &[code(KeyCode::Down), k('j')], Intent::Down, "scroll down", None, false),
    b(Scope::Overlay, &[code(KeyCode::Up), k('k')], Intent::Up, "scroll up", None, false),
    b(Scope::Overlay, &[code(KeyCode::PageDown)], Intent::PageDown, "a page down", None, false),
    b(Scope::Overlay, &[code(KeyCode::PageUp)], Intent::PageUp, "a page up", None, false),
    b(Scope::Overlay, &[code(KeyCode::Esc), k('q'), k('?'), code(KeyCode::Enter)], Intent::Back, "close", Some("close"), false),
];

/// True when a key event is this key (Shift is ignored; Control and Alt must match).
pub fn matches(key: &Key, ev: &KeyEvent) -> bool {
    let mask = KeyModifiers::CONTROL | KeyModifiers::ALT;
    let code_eq = match (key.code, ev.code) {
        (KeyCode::Char(a), KeyCode::Char(b)) => {
            if key.mods.contains(KeyModifiers::CONTROL) {
                a.eq_ignore_ascii_case(&b)
            } else {
                a == b
            }
        }
        (a, b) => a == b,
    };
    code_eq && (ev.modifiers & mask) == (key.mods & mask)
}

/// The action of a key in these scopes (searched in order), if any.
pub fn lookup(scopes: &[Scope], ev: &KeyEvent, readonly: bool) -> Option<Intent> {
    for s in scopes {
        for bind in KEYMAP.iter().filter(|bd| bd.scope == *s) {
            if readonly && bind.changes {
                continue;
            }
            if bind.keys.iter().any(|key| matches(key, ev)) {
                return Some(bind.intent);
            }
        }
    }
    None
}

/// How a key is written for people: `q`, `Ctrl-C`, `Tab`, `↓`.
pub fn label(key: &Key) -> String {
    let base = match key.code {
        KeyCode::Char(' ') => "Space".to_string(),
        KeyCode::Char(c) => c.to_string(),
        KeyCode::Tab => "Tab".into(),
        KeyCode::BackTab => "S-Tab".into(),
        KeyCode::Enter => "Enter".into(),
        KeyCode::Esc => "Esc".into(),
        KeyCode::Up => "↑".into(),
        KeyCode::Down => "↓".into(),
        KeyCode::Left => "←".into(),
        KeyCode::Right => "→".into(),
        KeyCode::PageUp => "PgUp".into(),
        KeyCode::PageDown => "PgDn".into(),
        KeyCode::Home => "Home".into(),
        KeyCode::End => "End".into(),
        KeyCode::Backspace => "Bksp".into(),
        KeyCode::Delete => "Del".into(),
        other => format!("{other:?}"),
    };
    if key.mods.contains(KeyModifiers::CONTROL) {
        format!("Ctrl-{}", base.to_ascii_uppercase())
    } else {
        base
    }
}

/// The hints for the bar: (key, word) for the bindings of these scopes that have one.
///
/// Each hint says whether it is enabled: owner actions are shown disabled without owner authority.
pub fn hints(scopes: &[Scope], readonly: bool, owner: bool) -> Vec<(String, &'static str, bool)> {
    let mut out = Vec::new();
    for s in scopes {
        for bind in KEYMAP.iter().filter(|bd| bd.scope == *s) {
            if readonly && bind.changes {
                continue;
            }
            if let (Some(h), Some(key)) = (bind.hint, bind.keys.first()) {
                out.push((label(key), h, owner || !needs_owner(bind.intent)));
            }
        }
    }
    out
}

/// True for the actions only the owner may take (the store signs them, or refuses them).
///
/// Adding a todo is one: the board acts as `owner`, and no line says `owner` unsigned.
pub fn needs_owner(intent: Intent) -> bool {
    matches!(
        intent,
        Intent::Approve
            | Intent::Reject
            | Intent::Reassign
            | Intent::Release
            | Intent::TogglePause
            | Intent::AddTodo
            | Intent::Pair
    )
}

/// The help overlay's lines: a heading per scope, then `keys  what it does`.
pub fn help_lines(readonly: bool) -> Vec<(Option<String>, String)> {
    let order = [
        Scope::Always,
        Scope::Global,
        Scope::Gates,
        Scope::Todos,
        Scope::Detail,
        Scope::Confirm,
        Scope::Input,
        Scope::Picker,
        Scope::AgentPicker,
        Scope::Errors,
        Scope::Chart,
        Scope::Pair,
        Scope::Overlay,
    ];
    let mut out = Vec::new();
    for s in order {
        let rows = scope_lines(s, readonly);
        if rows.is_empty() {
            continue;
        }
        out.push((None, s.title().to_string()));
        out.extend(rows.into_iter().map(|(k, h)| (Some(k), h)));
    }
    out
}

/// The help lines of one scope's bindings: `(keys, what it does)`.
pub fn scope_lines(scope: Scope, readonly: bool) -> Vec<(String, String)> {
    KEYMAP
        .iter()
        .filter(|bd| bd.scope == scope)
        .map(|bind| {
            let keys: Vec<String> = bind.keys.iter().map(label).collect();
            let mut help = bind.help.to_string();
            if readonly && bind.changes {
                help.push_str(" (off: --readonly)");
            }
            (keys.join(" "), help)
        })
        .collect()
}

/// The scopes of the board with this pane focused: the pane's own keys first, then the board's.
pub fn board_scopes(pane: Option<Scope>) -> Vec<Scope> {
    let mut v: Vec<Scope> = pane.into_iter().collect();
    v.push(Scope::Global);
    v.push(Scope::Always);
    v
}
