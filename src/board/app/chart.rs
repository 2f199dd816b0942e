//! The metric chart's keys: open it, switch the metric, flip the best end, todo or goal.

use super::*;

impl App {
    /// Opens the metric chart: the selected todo's points when it has any, else the goal's.
    pub(super) fn open_chart(&mut self) {
        let goal = self.selected_todo().is_none_or(|id| !self.metrics.has(&id));
        self.mode = Mode::Chart(ChartView {
            goal,
            ..ChartView::default()
        });
    }

    /// A key in the metric chart.
    pub(super) fn in_chart(&mut self, intent: Intent, mut c: ChartView) -> Vec<Effect> {
        match intent {
            Intent::Right | Intent::Left => {
                let sel = self.selected_todo();
                let names = self.metrics.names(c.todo(sel.as_deref()));
                let n = names.len();
                if n > 0 {
                    let i = c
                        .metric(&names)
                        .and_then(|m| names.iter().position(|(x, _)| x == m))
                        .unwrap_or(0);
                    let j = if intent == Intent::Right {
                        (i + 1) % n
                    } else {
                        (i + n - 1) % n
                    };
                    c.metric = Some(names[j].0.clone());
                }
            }
            Intent::FlipBest => c.flip = !c.flip,
            Intent::MetricScope if c.goal && self.selected_todo().is_none() => {
                self.say("no todo selected: the chart shows the whole goal", false)
            }
            Intent::MetricScope => c.goal = !c.goal,
            Intent::Back => {
                self.mode = Mode::Normal;
                return Vec::new();
            }
            _ => {}
        }
        self.mode = Mode::Chart(c);
        Vec::new()
    }
}
