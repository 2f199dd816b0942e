//! The board's side of pairing a phone: the dialog opened, its ticks, and what the loop's steps
//! brought back.

use super::*;
use crate::board::dialogs::pair::{POLL_MS, Step};

impl App {
    /// `P`: the pair-a-phone dialog, and the loop asked for a one-time URL.
    pub(super) fn open_pair(&mut self) -> Vec<Effect> {
        if self.pair_dir.is_none() {
            let why = "cannot tell where the pairing files go: set HOME or XDG_STATE_HOME";
            self.mode = Mode::Pair(Pair::new(Step::Failed(why.into())));
            return Vec::new();
        }
        self.mode = Mode::Pair(Pair::new(Step::Starting));
        vec![Effect::Pair(PairAsk::Start)]
    }

    /// The clock: the dialog asks again whether the phone has sent its key.
    pub(super) fn pair_tick(&mut self, now: Ts) -> Vec<Effect> {
        match &mut self.mode {
            Mode::Pair(p) => p.on_tick(now).map(Effect::Pair).into_iter().collect(),
            _ => Vec::new(),
        }
    }

    /// How often the loop should tick now: quickly while the dialog waits for the phone.
    pub fn quick_tick(&self) -> Option<std::time::Duration> {
        let waiting = matches!(&self.mode, Mode::Pair(p) if matches!(p.step, Step::Waiting(_)));
        waiting.then(|| std::time::Duration::from_millis(POLL_MS as u64 / 2))
    }

    /// What a step of pairing brought: the dialog moves on or closes; a pairing that started
    /// after its dialog closed is ended at once.
    pub(super) fn on_pair_news(&mut self, news: PairNews) -> Vec<Effect> {
        let Mode::Pair(p) = &mut self.mode else {
            return match news {
                PairNews::Started(Ok(s)) => vec![Effect::Pair(PairAsk::Answer(s, false))],
                _ => Vec::new(),
            };
        };
        if let Some((line, error)) = p.on_news(news) {
            self.mode = Mode::Normal;
            self.say(line, error);
        }
        Vec::new()
    }
}
