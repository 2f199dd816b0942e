//! The board's normal-mode actions: panes, gate decisions, release, pause, and the selection.

use super::*;

impl App {
    pub(super) fn normal(&mut self, intent: Intent) -> Vec<Effect> {
        let focus = self.focus;
        if let Some(fx) = self.route(focus, intent) {
            return fx;
        }
        match intent {
            Intent::Help => self.mode = Mode::Help(Help { scroll: 0 }),
            Intent::Agents => self.mode = Mode::Agents(Roster { scroll: 0 }),
            Intent::Metrics => {
                let sel = self.selected_todo();
                self.mode = Mode::Chart(MetricChart::open(&self.metrics, sel.as_deref()));
            }
            Intent::NextPane => return self.focus_by(1),
            Intent::PrevPane => return self.focus_by(Pane::ALL.len() - 1),
            Intent::Open => {
                if self.focus == Pane::Gates && self.selected_gate().is_some()
                    || self.focus != Pane::Gates && self.selected_todo().is_some()
                {
                    self.mode = Mode::Detail(Detail { scroll: 0 });
                } else {
                    self.say("nothing selected", false);
                }
            }
            Intent::Filter => self.mode = Mode::Filter,
            Intent::Back => {
                if !self.filter.is_empty() {
                    self.filter.clear();
                    self.derive();
                    return self.selection_changed();
                }
                if self.nested {
                    self.back = true;
                }
                self.message = None;
            }
            Intent::Reload => return vec![Effect::Reload],
            Intent::TogglePause => self.toggle_pause(),
            Intent::AddTodo => self.open_input(InputFor::TodoTitle),
            Intent::NextGate => self.next_gate(),
            Intent::Copy => return self.copy_id(),
            Intent::Sort => return self.toggle_sort(),
            Intent::Times => self.toggle_times(),
            Intent::Errors => self.show_errors(),
            Intent::Edit => return self.edit_problem(0),
            Intent::Pair => return self.open_pair(),
            _ => {}
        }
        Vec::new()
    }

    /// Focus the pane `by` places on (wrapping).
    fn focus_by(&mut self, by: usize) -> Vec<Effect> {
        let i = Pane::ALL.iter().position(|p| *p == self.focus).unwrap_or(0);
        self.focus = Pane::ALL[(i + by) % Pane::ALL.len()];
        self.selection_changed()
    }

    /// `p`: ask before pausing an active goal, or resuming a paused one.
    fn toggle_pause(&mut self) {
        match self.snap.as_ref().map(|s| s.config.goal.status) {
            Some(GoalStatus::Active) => self.mode = Mode::Confirm(Confirm::new(OwnerAct::Pause)),
            Some(GoalStatus::Paused) => self.mode = Mode::Confirm(Confirm::new(OwnerAct::Resume)),
            Some(GoalStatus::Complete) => self.say("the goal is complete; nothing to pause", true),
            None => self.say("no goal loaded", true),
        }
    }

    /// Offers a key's action to a pane; `None` when the pane does not own it.
    pub(super) fn route(&mut self, pane: Pane, intent: Intent) -> Option<Vec<Effect>> {
        let on = OnScreen {
            snap: self.snap.as_ref(),
            columns: &self.columns,
            journal: &self.journal,
            now: self.now,
            deciding: &self.decisions.deciding,
        };
        let out = match pane {
            Pane::Gates => self.gates.handle(intent, &on),
            Pane::Todos => self.todos.handle(intent, &on),
            Pane::Evidence => self.evidence.handle(intent, &on),
            Pane::Activity => self.activity.handle(intent, &on),
        };
        self.outcome(out)
    }

    /// Does what a pane's key asks of the board.
    fn outcome(&mut self, out: Outcome) -> Option<Vec<Effect>> {
        match out {
            Outcome::Ignored => return None,
            Outcome::Done => {}
            Outcome::Moved => return Some(self.selection_changed()),
            Outcome::PickOption(gate, options) => {
                self.mode = Mode::Picker(Picker::options(gate, options));
            }
            Outcome::PickAgent(todo, holder) => {
                let p = Picker::agents(todo, holder.as_deref(), &self.on_screen());
                self.mode = Mode::Picker(p);
            }
            Outcome::Confirm(a) => self.mode = Mode::Confirm(Confirm::new(a)),
            Outcome::Ask(purpose) => self.open_input(purpose),
            Outcome::Say(text, error) => self.say(text, error),
        }
        Some(Vec::new())
    }

    /// Moves the focused pane's selection a row down (`1`) or up (`-1`).
    pub(super) fn move_sel(&mut self, by: i64) -> Vec<Effect> {
        let intent = if by > 0 { Intent::Down } else { Intent::Up };
        self.route(self.focus, intent).unwrap_or_default()
    }

    pub(super) fn selection_changed(&mut self) -> Vec<Effect> {
        match self.selected_todo() {
            Some(id) if self.evidence.stale(&id) => {
                self.evidence.scroll = 0;
                vec![Effect::LoadEvidence(id)]
            }
            _ => Vec::new(),
        }
    }

    /// The selected card of the focused column.
    pub fn selected_card(&self) -> Option<&derive::Card> {
        self.todos.selected(&self.columns)
    }

    /// The id of the selected todo (of the focused column).
    pub fn selected_todo(&self) -> Option<String> {
        self.selected_card().map(|c| c.id.clone())
    }

    /// The id of the selected gate.
    pub fn selected_gate(&self) -> Option<String> {
        self.gates.selected().cloned()
    }
}
