//! The board's mouse: clicks select and focus, the wheel scrolls.

use super::*;

impl App {
    pub(super) fn on_mouse(&mut self, m: MouseEvent) -> Vec<Effect> {
        if self.mode != Mode::Normal {
            return Vec::new();
        }
        let area = Rect::new(0, 0, self.size.0, self.size.1);
        let areas = layout::areas(area, &self.layout_input());
        let pos = Position::new(m.column, m.row);
        let hit = areas
            .panes
            .iter()
            .find(|(_, r)| r.contains(pos))
            .map(|(p, r)| (*p, *r));
        let Some((pane, rect)) = hit else {
            return Vec::new();
        };
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                self.focus = pane;
                if pane == Pane::Todos {
                    let (col, row) = layout::todo_hit(&areas, pos, &self.todos.sel, self.todos.col);
                    self.todos.col = col;
                    if let Some(row) = row {
                        self.todos.select(row, &self.columns);
                    }
                } else if pane == Pane::Gates
                    && let inside = layout::inner(rect)
                    && let Some(row) = layout::gate_hit(
                        rect,
                        pos,
                        self.gates.sel,
                        self.gate_rows(inside.width, inside.height),
                    )
                    && row < self.gates.ids.len()
                {
                    self.gates.select(row);
                }
                self.selection_changed()
            }
            MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
                let keep = self.focus;
                self.focus = pane;
                if pane == Pane::Todos {
                    self.todos.col =
                        layout::todo_hit(&areas, pos, &self.todos.sel, self.todos.col).0;
                }
                let fx = self.move_sel(if m.kind == MouseEventKind::ScrollDown {
                    1
                } else {
                    -1
                });
                if pane != Pane::Todos {
                    self.focus = keep;
                }
                fx
            }
            _ => Vec::new(),
        }
    }
}
