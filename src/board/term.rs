//! The terminal: raw mode, alternate screen and mouse, restored on exit, panic, signals and Ctrl-Z.

use std::io::{self, Stdout, stdout};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::cursor::{Hide, Show};
use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    Clear, ClearType, EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};

use crate::board::app::App;
use crate::board::view;

static TERMINATED: AtomicBool = AtomicBool::new(false);
static CONTINUED: AtomicBool = AtomicBool::new(false);
static HOOKS: Once = Once::new();
/// The window title the board set, if any: the terminal's own was pushed first (XTWINOPS 22) and
/// is popped back (23) when the terminal is restored.
static TITLE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
static TITLE_PUSHED: AtomicBool = AtomicBool::new(false);

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
    let _ = execute!(stdout(), DisableMouseCapture, LeaveAlternateScreen, Show);
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
    execute!(stdout(), EnterAlternateScreen, EnableMouseCapture, Hide)
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
        self.terminal.draw(|f| view::draw(f, &app.view()))?;
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
}

impl Drop for Term {
    fn drop(&mut self) {
        restore();
    }
}
