//! The pair-a-phone dialog: the QR code of a one-time URL for `loopx web`, then the phone's
//! fingerprint to compare, and the owner's `y` that enrolls its key (signed) or `n` that ends it.
//!
//! The dialog does no I/O: its keys and ticks ask the board's loop for a step ([`PairAsk`]),
//! which runs the device flows and hands back what came of it ([`PairNews`]).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Clear, Paragraph};

use super::frame::{centered, frame_box, inner_w, keys_line, styled, wrap};
use super::reply::{PairAsk, Reply};
use crate::board::keymap::{Intent, Scope};
use crate::board::panes::text::countdown;
use crate::board::panes::{Overlay, Scene, block, title, trunc};
use crate::board::theme::{Role, Theme};
use crate::flows::device::{Pairing, Started, State};
use crate::flows::owner::line_of;
use crate::kernel::{Code, DevicePolicy, Error, Ts};
use crate::text::escape as esc;

/// How often at most the dialog asks whether the phone has sent its key.
pub const POLL_MS: i64 = 300;

/// The dialog's title.
const NAME: &str = "Pair a phone";

/// Columns between the QR code and the text beside it.
const GAP: u16 = 2;

/// The narrowest the text beside the QR code gets.
const SIDE_W: u16 = 30;

/// Where pairing stands, as the dialog shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The board asked for a URL.
    Starting,
    /// No pairing: why, with the fix.
    Failed(String),
    /// The URL is out; the phone has not sent its key.
    Waiting(Started),
    /// The phone sent its key: what it says it is, and the key's fingerprint.
    Sent {
        /// The pairing.
        started: Started,
        /// What the phone says it is (escaped).
        label: String,
        /// The fingerprint both screens show.
        fingerprint: String,
    },
}

/// What the board's loop brings back from a step of pairing.
#[derive(Debug, Clone)]
pub enum PairNews {
    /// The pairing started (its URL), or why not.
    Started(Result<Started, Error>),
    /// Where the pairing stands.
    Polled(Result<Pairing, Error>),
    /// The answer's outcome: the enrolled device, `None` when declined.
    Answered(Result<Option<DevicePolicy>, Error>),
}

/// The pair-a-phone dialog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    /// Where pairing stands.
    pub step: Step,
    /// When the board last asked where the pairing stands.
    pub polled: Option<Ts>,
    /// The owner's answer, once given (true: yes), while the loop carries it out.
    pub answered: Option<bool>,
}

impl Pair {
    /// A dialog at `step`.
    pub fn new(step: Step) -> Pair {
        Pair {
            step,
            polled: None,
            answered: None,
        }
    }

    /// The pairing shown, if one started.
    pub fn started(&self) -> Option<&Started> {
        match &self.step {
            Step::Waiting(s) | Step::Sent { started: s, .. } => Some(s),
            Step::Starting | Step::Failed(_) => None,
        }
    }

    /// Its key hints: `y` and `n` only once the phone sent its key.
    pub fn fit_hints(&self, hints: &mut Vec<(String, &'static str, bool)>) {
        if !matches!(self.step, Step::Sent { .. }) || self.answered.is_some() {
            hints.retain(|(_, h, _)| !matches!(*h, "enroll" | "decline"));
        }
    }

    /// A key: `y` enrolls the key shown, `n` declines it, Esc closes (ending a pairing).
    pub fn on_intent(&mut self, intent: Intent) -> Reply {
        if self.answered.is_some() {
            return Reply::Stay;
        }
        let sent = matches!(self.step, Step::Sent { .. });
        match (intent, self.started().cloned()) {
            (Intent::Confirm | Intent::Cancel, Some(s)) if sent => {
                let yes = intent == Intent::Confirm;
                self.answered = Some(yes);
                Reply::Pair(PairAsk::Answer(s, yes))
            }
            (Intent::Confirm, Some(_)) => {
                Reply::Say("the phone has not sent its key yet".into(), false)
            }
            (Intent::Back, Some(s)) => {
                self.answered = Some(false);
                Reply::Pair(PairAsk::Answer(s, false))
            }
            (Intent::Back, None) => Reply::Close,
            _ => Reply::Stay,
        }
    }

    /// The clock: while the phone has not sent its key, ask again (every [`POLL_MS`] at most).
    /// A key sent and not answered before the URL expires is ended: `y` could not enroll it.
    pub fn on_tick(&mut self, now: Ts) -> Option<PairAsk> {
        if let Step::Sent { started, .. } = &self.step
            && self.answered.is_none()
            && now.0 > started.expires_at.0
        {
            self.step = Step::Failed("the pairing URL expired: press P to start again".into());
            return None;
        }
        let Step::Waiting(s) = &self.step else {
            return None;
        };
        if self.answered.is_some() || self.polled.is_some_and(|p| now.since(p).0 < POLL_MS) {
            return None;
        }
        self.polled = Some(now);
        Some(PairAsk::Poll(s.clone()))
    }

    /// What a step brought: the dialog moves on, or `Some((line, error))` when it closes with
    /// that line in the status bar.
    pub fn on_news(&mut self, news: PairNews) -> Option<(String, bool)> {
        match news {
            PairNews::Started(Ok(s)) => self.step = Step::Waiting(s),
            PairNews::Started(Err(e)) => self.step = Step::Failed(no_pairing(e)),
            PairNews::Polled(Ok(p)) => self.polled_as(p),
            PairNews::Polled(Err(e)) => self.step = Step::Failed(line_of(e)),
            PairNews::Answered(r) => return Some(self.closing(r)),
        }
        None
    }

    /// The pairing as the flow read it: still waiting, the phone's key, or over.
    fn polled_as(&mut self, p: Pairing) {
        let Step::Waiting(started) = &self.step else {
            return;
        };
        self.step = match (p.state, p.fingerprint()) {
            (State::Waiting, _) => return,
            (State::Submitted, Some(fingerprint)) => Step::Sent {
                started: started.clone(),
                label: esc(p.label.as_deref().unwrap_or("a phone")).into_owned(),
                fingerprint,
            },
            (State::Submitted, None) => {
                Step::Failed("the phone sent a key that is not Ed25519".into())
            }
            (State::Enrolled | State::Declined, _) => {
                Step::Failed("the pairing URL expired unused: press P to start again".into())
            }
        };
    }

    /// The status bar's line once the answer was carried out.
    fn closing(&self, r: Result<Option<DevicePolicy>, Error>) -> (String, bool) {
        let name = self.started().map_or("the phone", |s| s.name.as_str());
        match (r, &self.step) {
            (Ok(Some(_)), Step::Sent { fingerprint, .. }) => (
                format!("enrolled {name} ({fingerprint}): it may decide gates now"),
                false,
            ),
            (Ok(Some(_)), _) => (format!("enrolled {name}"), false),
            (Ok(None), _) => (
                "not enrolled: the pairing URL no longer works".into(),
                false,
            ),
            (Err(e), _) => (format!("not enrolled: {}", line_of(e)), true),
        }
    }
}

/// Why no pairing started, in one line with the fix (the flow's usage error: no `loopx web`
/// announced itself; its hint names `--url`, which the board has not).
fn no_pairing(e: Error) -> String {
    match e.code {
        Code::Usage => "no `loopx web` is running: start `loopx web` first".into(),
        _ => line_of(e),
    }
}

impl Overlay for Pair {
    fn scopes(&self) -> Vec<Scope> {
        vec![Scope::Pair, Scope::Always]
    }

    /// The QR code and the URL while waiting, the fingerprint once the phone sent its key.
    fn draw(&self, f: &mut Frame, area: Rect, sc: &Scene) {
        let t = sc.theme;
        let w = inner_w(area);
        let close = [("Esc", "close")];
        match &self.step {
            Step::Starting => {
                let body = vec![Line::styled("starting a pairing…", t.fg(Role::Fg))];
                frame_box(f, area, sc, NAME.into(), body, keys_line(&close, t));
            }
            Step::Failed(why) => {
                let body = styled(wrap(why, w, 4), t.fg(Role::Error)).collect();
                frame_box(f, area, sc, NAME.into(), body, keys_line(&close, t));
            }
            Step::Waiting(s) => waiting(f, area, sc, s),
            Step::Sent {
                started,
                label,
                fingerprint,
            } => self.sent(f, area, sc, (started, label, fingerprint)),
        }
    }
}

impl Pair {
    /// The phone's fingerprint, large and alone on its line, and the question.
    fn sent(&self, f: &mut Frame, area: Rect, sc: &Scene, (s, label, fp): (&Started, &str, &str)) {
        let t = sc.theme;
        let w = inner_w(area);
        let mut body: Vec<Line> = styled(
            wrap(&format!("{label} sent its key. Its fingerprint:"), w, 2),
            t.fg(Role::Fg),
        )
        .collect();
        body.push(Line::raw(""));
        let big = t
            .fg(Role::Accent)
            .add_modifier(Modifier::BOLD | Modifier::REVERSED);
        body.push(Line::styled(format!("  {fp}  "), big).centered());
        body.push(Line::raw(""));
        let bold = t.fg(Role::Fg).add_modifier(Modifier::BOLD);
        let ask = format!("y enrolls it as {}, n declines", s.name);
        for l in ["Does the phone show the same fingerprint?", ask.as_str()] {
            body.extend(styled(wrap(l, w, 2), bold));
        }
        let who = if sc.owner.verified {
            "signed with the owner's key"
        } else {
            "owner authority unverified: the store refuses this without the owner's key"
        };
        body.extend(styled(wrap(who, w, 2), t.dim()));
        let left = format!("expires in {}", countdown(s.expires_at.0 - sc.now.0));
        body.push(Line::styled(left, t.dim()));
        body.push(Line::raw(""));
        let keys = match self.answered {
            Some(true) => vec![("…", "enrolling")],
            Some(false) => vec![("…", "ending the pairing")],
            None => vec![("y", "enroll"), ("n", "decline"), ("Esc", "close")],
        };
        frame_box(f, area, sc, NAME.into(), body, keys_line(&keys, t));
    }
}

/// The QR code of the URL with what to do beside it, the URL whole under it; a line saying to
/// make the terminal taller when the code would be cut.
fn waiting(f: &mut Frame, area: Rect, sc: &Scene, s: &Started) {
    let t = sc.theme;
    let code = crate::qr::half_blocks(&s.url);
    let qr_w = code.first().map_or(0, |r| r.chars().count()) as u16;
    let qr_h = code.len() as u16;
    let text_w = (qr_w + GAP + SIDE_W).max(s.url.chars().count() as u16);
    let (box_w, box_h) = (text_w + 2, qr_h + 1 + 2);
    // Keep the status bar and the key hints in sight when there is room.
    let room = if area.height >= box_h + 2 {
        Rect {
            height: area.height - 2,
            ..area
        }
    } else {
        area
    };
    if code.is_empty() || room.width < box_w || room.height < box_h {
        let why = "make the terminal taller, or run `loopx web pair`";
        let mut body: Vec<Line> = styled(wrap(why, inner_w(area), 2), t.fg(Role::Warn)).collect();
        body.extend(styled(wrap(&s.url, inner_w(area), 3), t.fg(Role::Fg)));
        frame_box(
            f,
            area,
            sc,
            NAME.into(),
            body,
            keys_line(&[("Esc", "close")], t),
        );
        return;
    }
    let r = centered(room, box_w, box_h);
    f.render_widget(Clear, r);
    let b = block(title(NAME, t), true, t).style(t.base());
    let inner = b.inner(r);
    f.render_widget(b, r);
    let [top, url] =
        Layout::vertical([Constraint::Length(qr_h), Constraint::Length(1)]).areas(inner);
    let [qr, _, side] = Layout::horizontal([
        Constraint::Length(qr_w),
        Constraint::Length(GAP),
        Constraint::Min(0),
    ])
    .areas(top);
    let rows: Vec<Line> = code.into_iter().map(Line::raw).collect();
    f.render_widget(Paragraph::new(rows).style(qr_style(t)), qr);
    f.render_widget(
        Paragraph::new(side_lines(sc, s, side)).style(t.base()),
        side,
    );
    let link = Line::styled(trunc(&s.url, usize::from(url.width)), t.fg(Role::Accent));
    f.render_widget(Paragraph::new(link), url);
}

/// Light modules white and dark ones black whatever the theme (a scanner wants dark on light);
/// without colour, the terminal's own.
fn qr_style(t: &Theme) -> Style {
    if t.color {
        Style::new().fg(Color::White).bg(Color::Black)
    } else {
        Style::new()
    }
}

/// What to do while the phone has not sent its key, beside the code; the keys at the bottom.
fn side_lines(sc: &Scene, s: &Started, side: Rect) -> Vec<Line<'static>> {
    let t = sc.theme;
    let w = usize::from(side.width);
    let left = s.expires_at.0 - sc.now.0;
    let mut out: Vec<Line> = Vec::new();
    let text = [
        (
            "Open this on the phone:",
            t.fg(Role::Fg).add_modifier(Modifier::BOLD),
        ),
        ("scan the code, or type the URL under it", t.fg(Role::Fg)),
        ("it works once", t.dim()),
        ("", t.base()),
        ("waiting for the phone...", t.fg(Role::Accent)),
    ];
    for (l, style) in text {
        out.extend(styled(wrap(l, w, 2), style));
    }
    let expiry = if left > 0 {
        format!("expires in {}", countdown(left))
    } else {
        "expired: press Esc, then P again".into()
    };
    out.extend(styled(wrap(&expiry, w, 2), t.dim()));
    let used = out.len() as u16;
    let pad = side.height.saturating_sub(used + 1);
    out.extend((0..pad).map(|_| Line::raw("")));
    out.push(keys_line(&[("Esc", "close")], t));
    out
}
