//! The terminal: raw mode, alternate screen and mouse, restored on exit, panic, signals, Ctrl-Z and
//! while an editor runs; the input thread; the clipboard (OSC 52).

use std::io::{self, Stdout, stdout};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::cursor::{Hide, Show};
use ratatui::crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    Clear, ClearType, EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};

use crate::board::app::App;
use crate::board::draw;

static TERMINATED: AtomicBool = AtomicBool::new(false);
static CONTINUED: AtomicBool = AtomicBool::new(false);
static HOOKS: Once = Once::new();
/// The window title the board set, if any: the terminal's own was pushed first (XTWINOPS 22) and
/// is popped back (23) when the terminal is restored.
static TITLE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
static TITLE_PUSHED: AtomicBool = AtomicBool::new(false);
/// Set while another program has the terminal: the input thread stops reading.
static INPUT_PAUSE: AtomicBool = AtomicBool::new(false);
/// Set by the input thread once it has stopped reading (it reads nothing until the pause ends).
static INPUT_PARKED: AtomicBool = AtomicBool::new(false);
/// How long the input thread waits for a key before it looks for a pause again.
const INPUT_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// Reads terminal events for the board's loop until `send` refuses one or the terminal fails;
/// stops reading while the terminal is handed to another program (see [`Term::hand_over`]).
pub fn read_input(mut send: impl FnMut(ratatui::crossterm::event::Event) -> bool) {
    use ratatui::crossterm::event;
    loop {
        if INPUT_PAUSE.load(Ordering::SeqCst) {
            INPUT_PARKED.store(true, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(10));
            continue;
        }
        match event::poll(INPUT_POLL) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(_) => return,
        }
        let Ok(ev) = event::read() else { return };
        if !send(ev) {
            return;
        }
    }
}

/// Stops the input thread reading, and waits (a poll at most) until it has.
fn pause_input() {
    INPUT_PARKED.store(false, Ordering::SeqCst);
    INPUT_PAUSE.store(true, Ordering::SeqCst);
    let start = std::time::Instant::now();
    while !INPUT_PARKED.load(Ordering::SeqCst) && start.elapsed() < INPUT_POLL * 5 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn resume_input() {
    INPUT_PAUSE.store(false, Ordering::SeqCst);
}

/// Standard base64 (with padding) of `bytes`.
pub fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ABC[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The OSC 52 sequence that sets the clipboard to `text`; inside tmux also wrapped for tmux's
/// passthrough (the plain one works with `set-clipboard on`, the wrapped one with
/// `allow-passthrough on`).
pub fn osc52(text: &str, tmux: bool) -> Vec<u8> {
    let seq = format!("\x1b]52;c;{}\x07", base64(text.as_bytes()));
    let mut out = seq.clone().into_bytes();
    if tmux {
        out.extend_from_slice(format!("\x1bPtmux;\x1b{seq}\x1b\\").as_bytes());
    }
    out
}

/// True once SIGTERM or SIGHUP arrived: the loop should stop and restore the terminal.
pub fn terminated() -> bool {
    TERMINATED.load(Ordering::SeqCst)
}

extern "C" fn on_signal(_: libc::c_int) {
    TERMINATED.store(true, Ordering::SeqCst);
}

extern "C" fn on_continue(_: libc::c_int) {
    CONTINUED.store(true, Ordering::SeqCst);
}

/// Puts the terminal back as it was (safe to call twice).
pub fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(
        stdout(),
        DisableBracketedPaste,
        DisableMouseCapture,
        LeaveAlternateScreen,
        Show
    );
    if TITLE_PUSHED.swap(false, Ordering::SeqCst) {
        // Terminals without a title stack ignore this.
        use std::io::Write as _;
        let _ = stdout().write_all(b"\x1b[23;0t");
        let _ = stdout().flush();
    }
}

/// Sets the window title, saving the terminal's own first.
fn set_title(text: &str) {
    use std::io::Write as _;
    if !TITLE_PUSHED.swap(true, Ordering::SeqCst) {
        let _ = stdout().write_all(b"\x1b[22;0t");
    }
    let _ = execute!(stdout(), ratatui::crossterm::terminal::SetTitle(text));
}

fn install_hooks() {
    HOOKS.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            prev(info);
        }));
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
            libc::signal(libc::SIGHUP, on_signal as *const () as libc::sighandler_t);
            libc::signal(
                libc::SIGCONT,
                on_continue as *const () as libc::sighandler_t,
            );
        }
    });
}

/// The board's terminal; restores the screen when dropped.
pub struct Term {
    /// Never dropped: ratatui's drop shows the cursor and, when the terminal is gone (a closed
    /// window), panics writing that it failed; [`restore`] shows the cursor instead.
    terminal: std::mem::ManuallyDrop<Terminal<CrosstermBackend<Stdout>>>,
}

impl std::fmt::Debug for Term {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Term")
    }
}

fn setup() -> io::Result<()> {
    enable_raw_mode()?;
    // Bracketed paste: a pasted newline is text, never Enter (which would submit a reason and
    // confirm the dialog after it with the next pasted `y`).
    execute!(
        stdout(),
        EnterAlternateScreen,
        EnableMouseCapture,
        EnableBracketedPaste,
        Hide
    )
}

impl Term {
    /// Enters raw mode and the alternate screen, with mouse capture.
    pub fn enter() -> io::Result<Term> {
        install_hooks();
        if let Err(e) = setup() {
            restore();
            return Err(e);
        }
        match Terminal::new(CrosstermBackend::new(stdout())) {
            Ok(terminal) => Ok(Term {
                terminal: std::mem::ManuallyDrop::new(terminal),
            }),
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }

    /// The terminal's size (columns, rows).
    pub fn size(&self) -> io::Result<(u16, u16)> {
        self.terminal.size().map(|s| (s.width, s.height))
    }

    /// Draws the app's view.
    pub fn draw(&mut self, app: &App) -> io::Result<()> {
        self.terminal.draw(|f| draw::frame(f, &app.scene()))?;
        Ok(())
    }

    /// Draws the overview of every project.
    pub fn draw_overview(&mut self, o: &crate::board::overview::state::Overview) -> io::Result<()> {
        self.terminal
            .draw(|f| crate::board::overview::render::draw(f, o))?;
        Ok(())
    }

    /// Rings the terminal bell (BEL).
    pub fn bell(&mut self) {
        use std::io::Write as _;
        let mut out = stdout();
        let _ = out.write_all(b"\x07");
        let _ = out.flush();
    }

    /// Sets the window title (OSC 0/2); the text is the board's own, never stored text.
    pub fn title(&mut self, text: &str) {
        if let Ok(mut t) = TITLE.lock() {
            *t = Some(text.to_string());
        }
        set_title(text);
    }

    /// Copies `text` to the terminal's clipboard (OSC 52; works over ssh and in tmux).
    pub fn copy(&mut self, text: &str) {
        use std::io::Write as _;
        let mut out = stdout();
        let _ = out.write_all(&osc52(text, std::env::var_os("TMUX").is_some()));
        let _ = out.flush();
    }

    /// Hands the real terminal to another program: the input thread stops reading, the screen,
    /// raw mode and mouse are restored, `run` runs, and the board takes the terminal back.
    pub fn hand_over<R>(&mut self, run: impl FnOnce() -> R) -> R {
        pause_input();
        restore();
        let r = run();
        self.take_back();
        resume_input();
        r
    }

    /// Sets the terminal up again after another program had it, on a cleared screen.
    fn take_back(&mut self) {
        let _ = setup();
        if let Some(t) = TITLE.lock().ok().and_then(|t| t.clone()) {
            set_title(&t);
        }
        // A fresh terminal on a cleared screen redraws everything. (`Terminal::clear` asks the
        // terminal for the cursor position, which races with the input thread reading stdin.)
        let _ = execute!(stdout(), Clear(ClearType::All));
        if let Ok(t) = Terminal::new(CrosstermBackend::new(stdout())) {
            *self.terminal = t;
        }
    }

    /// Ctrl-Z: restores the terminal, stops the process, and sets it up again on `fg`.
    pub fn suspend(&mut self) {
        restore();
        CONTINUED.store(false, Ordering::SeqCst);
        // SAFETY: raising a signal on our own process; execution resumes here on SIGCONT.
        unsafe {
            libc::raise(libc::SIGTSTP);
        }
        // The stop may land a moment after raise returns: wait for SIGCONT (or, when nothing
        // stops us, as with an orphaned process group, go on after a short while).
        let start = std::time::Instant::now();
        while !CONTINUED.load(Ordering::SeqCst)
            && start.elapsed() < std::time::Duration::from_millis(300)
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        self.take_back();
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        restore();
    }
}
