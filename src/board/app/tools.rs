//! The operator's tools: copy an id (OSC 52), sort the columns, clock or relative times, the
//! file errors in full, and a broken file opened in `$EDITOR`.

use super::*;

impl App {
    /// The files that failed to load and the quarantined ones, most urgent first (as the banner).
    pub fn file_problems(&self) -> Vec<&Problem> {
        crate::board::alerts::problems(&self.problems, self.snap.as_ref())
    }

    /// `y`: the selected gate's or todo's id, to the terminal's clipboard.
    pub(super) fn copy_id(&mut self) -> Vec<Effect> {
        let id = match self.focus {
            Pane::Gates => self.selected_gate(),
            Pane::Todos | Pane::Evidence => self.selected_todo(),
            Pane::Activity => None,
        };
        match id {
            Some(id) => {
                self.say(
                    format!("copied {id} (OSC 52: the terminal's clipboard)"),
                    false,
                );
                vec![Effect::Copy(id)]
            }
            None => {
                self.say("nothing to copy: select a gate or a todo", true);
                Vec::new()
            }
        }
    }

    /// `s`: the next sort order of the todo columns.
    pub(super) fn toggle_sort(&mut self) -> Vec<Effect> {
        self.sort = self.sort.next();
        self.derive();
        self.say(format!("todos sorted by {}", self.sort.name()), false);
        self.selection_changed()
    }

    /// `t`: relative times, or clock times (UTC).
    pub(super) fn toggle_times(&mut self) {
        self.absolute = !self.absolute;
        let what = if self.absolute {
            "clock times (UTC)"
        } else {
            "relative times"
        };
        self.say(format!("showing {what}"), false);
    }

    /// `e`: every file error in full.
    pub(super) fn show_errors(&mut self) {
        if self.file_problems().is_empty() {
            self.say("no file errors: every file reads", false);
        } else {
            self.mode = Mode::Errors(FileErrors { sel: 0 });
        }
    }

    /// `E`: the file of the `n`th error in `$EDITOR`; the journal is never edited by hand.
    pub(super) fn edit_problem(&mut self, n: usize) -> Vec<Effect> {
        let Some(file) = self.file_problems().get(n).map(|p| p.file.clone()) else {
            self.say("no broken file to edit", false);
            return Vec::new();
        };
        if file == JOURNAL_FILE {
            self.say(
                "the journal is append-only and chained: `loopx doctor` says how to repair it",
                true,
            );
            return Vec::new();
        }
        self.mode = Mode::Normal;
        self.say(format!("editing {file} in $EDITOR"), false);
        vec![Effect::Edit(file)]
    }

    /// After a load: the file-errors overlay closes when every file reads, and keeps its
    /// selection in range.
    pub(super) fn clamp_errors(&mut self) {
        if let Mode::Errors(e) = self.mode {
            let n = self.file_problems().len();
            self.mode = if n == 0 {
                Mode::Normal
            } else {
                Mode::Errors(FileErrors {
                    sel: e.sel.min(n - 1),
                })
            };
        }
    }
}
