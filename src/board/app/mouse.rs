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
                    let (col, row) = layout::todo_hit(&areas, pos, &self.col_sel, self.col);
                    self.col = col;
                    if let Some(row) = row {
                        let c = col.index();
                        let len = self.columns.cols[c].len();
                        if row < len {
                            self.col_sel[c] = row;
                            self.sel_ids[c] = self.columns.cols[c].get(row).map(|k| k.id.clone());
                        }
                    }
                } else if pane == Pane::Gates
                    && let Some(row) = layout::gate_hit(rect, pos, self.gate_sel)
                    && row < self.gate_ids.len()
                {
                    self.gate_sel = row;
                    self.sel_gate_id = self.gate_ids.get(row).cloned();
                }
                self.selection_changed()
            }
            MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
                let keep = self.focus;
                self.focus = pane;
                if pane == Pane::Todos {
                    self.col = layout::todo_hit(&areas, pos, &self.col_sel, self.col).0;
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
