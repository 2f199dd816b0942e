//! The scene: what one frame shows, borrowed from the board's state at one instant, and
//! the overlay drawn over it.

use std::collections::BTreeMap;

use crate::board::alerts::{self, Broken};
use crate::board::derive::sort::SortBy;
use crate::board::derive::{Card, Columns};
use crate::board::layout::{self, Pane};
use crate::board::metrics::Metrics;
use crate::board::theme::Theme;
use crate::flows::owner::Owner;
use crate::kernel::{Event, Gate, GateStatus, Problem, Snapshot, Ts};

use super::activity::ActivityPane;
use super::evidence::EvidencePane;
use super::gates::GatesPane;
use super::status::{Live, Message};
use super::todos::TodosPane;

/// A dialog or overlay drawn over the board: it owns its state and draws it from the frame's
/// scene.
pub trait Overlay: std::fmt::Debug {
    /// Draws it over `area` (the whole screen).
    fn draw(&self, f: &mut ratatui::Frame, area: ratatui::layout::Rect, sc: &Scene);

    /// The keymap's scopes of its keys, in order: its help and its hints.
    fn scopes(&self) -> Vec<crate::board::keymap::Scope>;
}

/// Everything one frame shows, borrowed from the app at one instant.
#[derive(Debug, Clone)]
pub struct Scene<'a> {
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
    /// The filter is being typed.
    pub filtering: bool,
    /// The dialog or overlay over the board, if any.
    pub overlay: Option<&'a dyn Overlay>,
    /// The filter.
    pub filter: &'a str,
    /// The evidence pane.
    pub evidence: &'a EvidencePane,
    /// The goal's metric points.
    pub metrics: &'a Metrics,
    /// The journal's tail, newest last.
    pub journal: &'a [Event],
    /// The activity pane.
    pub activity: &'a ActivityPane,
    /// Files that failed to load, by file.
    pub failed: &'a BTreeMap<String, Problem>,
    /// The status message.
    pub message: Option<&'a Message>,
    /// Events or polling.
    pub live: &'a Live,
    /// When the last load happened.
    pub last_reload: Option<Ts>,
    /// Changes are off.
    pub readonly: bool,
    /// Who acts: owner authority proven or not, and the note saying so.
    pub owner: &'a Owner,
    /// The key hints for the current mode and pane.
    pub hints: Vec<(String, &'static str, bool)>,
    /// The layout's inputs.
    pub layout: layout::Input,
    /// How the todo columns are sorted.
    pub sort: SortBy,
    /// Clock times instead of relative ones.
    pub absolute: bool,
}

impl<'a> Scene<'a> {
    /// The pending gates among those listed (the filter applies).
    pub fn pending(&self) -> usize {
        self.gates
            .iter()
            .filter(|g| g.effective_status() == GateStatus::Pending)
            .count()
    }

    /// The selected todo card, if any.
    pub fn selected_card(&self) -> Option<&'a Card> {
        self.todos.selected(self.columns)
    }

    /// Files that failed to load, and quarantined files.
    pub fn problems(&self) -> Vec<&'a Problem> {
        alerts::problems(self.failed, self.snap)
    }

    /// The banner's lines: failed loads, quarantined files, owner notes.
    pub fn banner(&self) -> Vec<String> {
        alerts::lines(self.failed.values(), self.snap)
    }

    /// Whether agents are refused, or which files are quarantined.
    pub fn broken(&self) -> Broken {
        alerts::broken(self.failed, self.snap)
    }
}
