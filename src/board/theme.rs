//! Themes: the named color roles of the board, loaded from `themes/*.toml`, and NO_COLOR.

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};

macro_rules! roles {
    ($($role:ident),* $(,)?) => {
        /// Every color role a theme names.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[allow(missing_docs)]
        pub enum Role { $($role),* }

        impl Role {
            /// Every role, in file order.
            pub const ALL: &'static [Role] = &[$(Role::$role),*];
        }

        /// The colors of one theme, one per role.
        #[derive(Debug, Clone, PartialEq)]
        #[allow(non_snake_case)]
        struct Colors { $($role: Color),* }

        impl Colors {
            fn uniform(c: Color) -> Colors {
                Colors { $($role: c),* }
            }
            fn get(&self, r: Role) -> Color {
                match r { $(Role::$role => self.$role),* }
            }
            fn from_map(m: &BTreeMap<String, Color>) -> Result<Colors, String> {
                let mut missing = Vec::new();
                let mut c = Colors::uniform(Color::Reset);
                $(match m.get(&role_name(Role::$role)) {
                    Some(v) => c.$role = *v,
                    None => missing.push(role_name(Role::$role)),
                })*
                if !missing.is_empty() {
                    return Err(format!("the theme does not name the color roles: {}", missing.join(", ")));
                }
                Ok(c)
            }
        }
    };
}

roles!(
    Fg,
    Bg,
    Dim,
    Border,
    BorderFocus,
    Title,
    Accent,
    SelectedFg,
    SelectedBg,
    StatusFg,
    StatusBg,
    Key,
    BannerFg,
    BannerBg,
    Ok,
    Warn,
    Error,
    Ready,
    Claimed,
    Waiting,
    Blocked,
    Done,
    GatePending,
    GateDecided,
    Spark,
    P0,
    P1,
);

/// The role's name as written in a theme file (`border_focus`).
pub fn role_name(r: Role) -> String {
    let dbg = format!("{r:?}");
    let mut out = String::new();
    for (i, c) in dbg.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 && !dbg.as_bytes()[i - 1].is_ascii_digit() {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The built-in themes: name and file text.
pub const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
];

/// A loaded theme: colors by role, or none at all under NO_COLOR.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    /// The theme's name.
    pub name: String,
    colors: Colors,
    /// False under NO_COLOR: every style is then plain, with modifiers only.
    pub color: bool,
}

#[derive(serde::Deserialize)]
struct File {
    name: Option<String>,
    colors: BTreeMap<String, String>,
}

impl Theme {
    /// Parses a theme file's text; every role must be named.
    pub fn from_toml(text: &str) -> Result<Theme, String> {
        let f: File = toml::from_str(text).map_err(|e| e.message().trim().to_string())?;
        let mut map = BTreeMap::new();
        for (k, v) in &f.colors {
            if !Role::ALL.iter().any(|r| role_name(*r) == *k) {
                return Err(format!("`{k}` is not a color role"));
            }
            let c = Color::from_str(v).map_err(|_| format!("`{v}` (for {k}) is not a color"))?;
            map.insert(k.clone(), c);
        }
        Ok(Theme {
            name: f.name.unwrap_or_else(|| "custom".into()),
            colors: Colors::from_map(&map)?,
            color: true,
        })
    }

    /// The default dark theme.
    pub fn dark() -> Theme {
        Theme::builtin("dark").unwrap_or_else(|_| Theme::fallback())
    }

    /// A built-in theme by name.
    pub fn builtin(name: &str) -> Result<Theme, String> {
        let (_, text) = BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| format!("no theme `{name}`; built in: dark, light, high-contrast"))?;
        Theme::from_toml(text)
    }

    /// A theme by built-in name or by path to a `.toml` file.
    pub fn load(spec: &str) -> Result<Theme, String> {
        if BUILTIN.iter().any(|(n, _)| *n == spec) {
            return Theme::builtin(spec);
        }
        let p = Path::new(spec);
        let text = std::fs::read_to_string(p).map_err(|e| format!("theme {spec}: {e}"))?;
        Theme::from_toml(&text).map_err(|e| format!("theme {spec}: {e}"))
    }

    /// A theme of terminal defaults (used only if a built-in file were broken).
    fn fallback() -> Theme {
        Theme {
            name: "plain".into(),
            colors: Colors::uniform(Color::Reset),
            color: false,
        }
    }

    /// This theme with color turned off (NO_COLOR).
    pub fn without_color(mut self) -> Theme {
        self.color = false;
        self
    }

    /// The color of a role (Reset under NO_COLOR).
    pub fn color_of(&self, r: Role) -> Color {
        if self.color {
            self.colors.get(r)
        } else {
            Color::Reset
        }
    }

    /// Text in a role's color.
    pub fn fg(&self, r: Role) -> Style {
        if self.color {
            Style::new().fg(self.colors.get(r))
        } else {
            Style::new()
        }
    }

    /// The base style of the screen.
    pub fn base(&self) -> Style {
        if self.color {
            Style::new()
                .fg(self.colors.get(Role::Fg))
                .bg(self.colors.get(Role::Bg))
        } else {
            Style::new()
        }
    }

    /// The selected row: colors, or reversed text under NO_COLOR.
    pub fn selected(&self) -> Style {
        if self.color {
            Style::new()
                .fg(self.colors.get(Role::SelectedFg))
                .bg(self.colors.get(Role::SelectedBg))
                .add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        }
    }

    /// The status bar.
    pub fn status(&self) -> Style {
        if self.color {
            Style::new()
                .fg(self.colors.get(Role::StatusFg))
                .bg(self.colors.get(Role::StatusBg))
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }

    /// The error banner.
    pub fn banner(&self) -> Style {
        let s = Style::new().add_modifier(Modifier::BOLD);
        if self.color {
            s.fg(self.colors.get(Role::BannerFg))
                .bg(self.colors.get(Role::BannerBg))
        } else {
            s.add_modifier(Modifier::REVERSED)
        }
    }

    /// A pane border, brighter and bold when focused.
    pub fn border(&self, focused: bool) -> Style {
        match (focused, self.color) {
            (true, true) => Style::new()
                .fg(self.colors.get(Role::BorderFocus))
                .add_modifier(Modifier::BOLD),
            (true, false) => Style::new().add_modifier(Modifier::BOLD),
            (false, _) => self.fg(Role::Border),
        }
    }

    /// Dim secondary text.
    pub fn dim(&self) -> Style {
        if self.color {
            self.fg(Role::Dim)
        } else {
            Style::new().add_modifier(Modifier::DIM)
        }
    }
}

/// True when the environment asks for no color (`NO_COLOR` set and not empty).
pub fn no_color_env() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}
