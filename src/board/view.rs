//! The view model (what one frame shows) and the pure `draw` over it.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::widgets::Block;

use crate::board::alerts::Broken;
use crate::board::app::{App, Live, Message, Mode};
use crate::board::derive::Columns;
use crate::board::keymap;
use crate::board::layout::{self, Areas};
use crate::board::panes::activity::ActivityPane;
use crate::board::panes::evidence::EvidencePane;
use crate::board::panes::gates::GatesPane;
use crate::board::panes::todos::TodosPane;
use crate::board::panes::{self, Pane};
use crate::board::theme::Theme;
use crate::kernel::{Event, Gate, GateStatus, GoalStatus, Problem, Snapshot, Ts};

/// Everything one frame shows, borrowed from the app at one instant.
#[derive(Debug, Clone)]
pub struct ViewModel<'a> {
    /// The clock of this frame.
    pub now: Ts,
    /// The colors.
    pub theme: &'a Theme,
    /// The project's root, as shown.
    pub project: &'a str,
    /// The last good state, if any.
    pub snap: Option<&'a Snapshot>,
    /// The todo columns.
    pub columns: &'a Columns,
    /// Gates in display order.
    pub gates: Vec<&'a Gate>,
    /// The gates pane.
    pub gate_pane: &'a GatesPane,
    /// The todos pane.
    pub todos: &'a TodosPane,
    /// The focused pane.
    pub focus: Pane,
    /// The mode (dialogs, overlays).
    pub mode: &'a Mode,
    /// The filter.
    pub filter: &'a str,
    /// The evidence pane.
    pub evidence: &'a EvidencePane,
    /// The gate's action scrolled, in the confirm dialog.
    pub action_scroll: usize,
    /// The journal's tail, newest last.
    pub journal: &'a [Event],
    /// The activity pane.
    pub activity: &'a ActivityPane,
    /// Files that failed to load, and quarantined files.
    pub problems: Vec<&'a Problem>,
    /// The banner's lines: failed loads, quarantined files, owner notes.
    pub banner: Vec<String>,
    /// Whether agents are refused, or which files are quarantined.
    pub broken: Broken,
    /// The status message.
    pub message: Option<&'a Message>,
    /// Events or polling.
    pub live: &'a Live,
    /// When the last load happened.
    pub last_reload: Option<Ts>,
    /// Changes are off.
    pub readonly: bool,
    /// Owner authority is proven.
    pub owner_verified: bool,
    /// The owner's key, or why authority is unverified.
    pub owner_note: &'a str,
    /// The key hints for the current mode and pane.
    pub hints: Vec<(String, &'static str, bool)>,
    /// The layout's inputs.
    pub layout: layout::Input,
    /// How the todo columns are sorted.
    pub sort: crate::board::derive::sort::SortBy,
    /// Clock times instead of relative ones.
    pub absolute: bool,
}

impl<'a> ViewModel<'a> {
    /// The view of an app.
    pub fn new(app: &'a App) -> ViewModel<'a> {
        let gates = app
            .snap
            .as_ref()
            .map(|s| {
                app.gates
                    .ids
                    .iter()
                    .filter_map(|id| s.gates.get(id))
                    .collect()
            })
            .unwrap_or_default();
        ViewModel {
            now: app.now,
            theme: &app.theme,
            project: &app.project,
            snap: app.snap.as_ref(),
            columns: &app.columns,
            gates,
            gate_pane: &app.gates,
            todos: &app.todos,
            focus: app.focus,
            mode: &app.mode,
            filter: &app.filter,
            evidence: &app.evidence,
            action_scroll: app.action_scroll,
            journal: &app.journal,
            activity: &app.activity,
            problems: app
                .problems
                .values()
                .chain(app.snap.iter().flat_map(|s| s.quarantined.values()))
                .collect(),
            banner: crate::board::alerts::lines(app.problems.values(), app.snap.as_ref()),
            broken: crate::board::alerts::broken(&app.problems, app.snap.as_ref()),
            message: app.message.as_ref(),
            live: &app.live,
            last_reload: app.last_reload,
            readonly: app.readonly,
            owner_verified: app.owner.verified,
            owner_note: &app.owner.note,
            hints: fit_state(
                keymap::hints(&app.scopes(), app.readonly, app.owner.verified),
                app.snap.as_ref().map(|s| s.config.goal.status),
            ),
            layout: app.layout_input(),
            sort: app.sort,
            absolute: app.absolute,
        }
    }

    /// The pending gates among those listed (the filter applies).
    pub fn pending(&self) -> usize {
        self.gates
            .iter()
            .filter(|g| g.effective_status() == GateStatus::Pending)
            .count()
    }

    /// The selected todo card, if any.
    pub fn selected_card(&self) -> Option<&'a crate::board::derive::Card> {
        self.todos.selected(self.columns)
    }
}

/// The hints that fit the goal's state: `p pause` while active, `p resume` while paused, neither
/// once complete (or before a goal is loaded).
pub fn fit_state(
    hints: Vec<(String, &'static str, bool)>,
    goal: Option<GoalStatus>,
) -> Vec<(String, &'static str, bool)> {
    hints
        .into_iter()
        .filter_map(|(k, h, on)| match (h, goal) {
            ("pause", Some(GoalStatus::Active)) => Some((k, h, on)),
            ("pause", Some(GoalStatus::Paused)) => Some((k, "resume", on)),
            ("pause", _) => None,
            _ => Some((k, h, on)),
        })
        .collect()
}

/// Draws one whole frame.
pub fn draw(f: &mut Frame, vm: &ViewModel) {
    let area = f.area();
    f.render_widget(Block::new().style(vm.theme.base()), area);
    let areas = layout::areas(area, &vm.layout);
    draw_areas(f, vm, &areas);
    panes::overlay::render(f, area, vm);
}

fn draw_areas(f: &mut Frame, vm: &ViewModel, a: &Areas) {
    panes::objective::render(f, a.header, vm, a.narrow);
    if let Some(b) = a.banner {
        panes::status::banner(f, b, vm);
    }
    for (p, r) in &a.panes {
        render_pane(f, *p, *r, vm);
    }
    if let Some(q) = a.quota {
        panes::quota::render(f, q, vm);
    }
    panes::status::status(f, a.status, vm);
    panes::status::hints(f, a.hints, vm);
}

/// Draws one focusable pane.
pub fn render_pane(f: &mut Frame, p: Pane, r: Rect, vm: &ViewModel) {
    match p {
        Pane::Gates => panes::gates::render(f, r, vm),
        Pane::Todos => panes::todos::render(f, r, vm),
        Pane::Evidence => panes::evidence::render(f, r, vm),
        Pane::Activity => panes::activity::render(f, r, vm),
    }
}
