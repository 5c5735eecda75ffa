//! Theme colours: the 17 chromatic hues and 5 neutral tones a theme may use, and the seven
//! colour roles of a theme.

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

macro_rules! colour_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "lowercase")]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(format!(concat!("{:?} is not a ", stringify!($name)), other)),
                }
            }
        }
    };
}

colour_enum!(
    /// A chromatic hue.
    ChromaticColor {
        Red => "red", Orange => "orange", Amber => "amber", Yellow => "yellow", Lime => "lime",
        Green => "green", Emerald => "emerald", Teal => "teal", Cyan => "cyan", Sky => "sky",
        Blue => "blue", Indigo => "indigo", Violet => "violet", Purple => "purple",
        Fuchsia => "fuchsia", Pink => "pink", Rose => "rose",
    }
);

colour_enum!(
    /// A neutral tone.
    NeutralColor { Slate => "slate", Gray => "gray", Zinc => "zinc", Neutral => "neutral", Stone => "stone" }
);

/// The colours of a theme, one per role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ThemeColors {
    pub primary: ChromaticColor,
    pub secondary: ChromaticColor,
    pub success: ChromaticColor,
    pub info: ChromaticColor,
    pub warning: ChromaticColor,
    pub error: ChromaticColor,
    pub neutral: NeutralColor,
}

impl ThemeColors {
    /// The built-in theme, used when a user has no snapshot and no preset is the default.
    pub const BUILT_IN: ThemeColors = ThemeColors {
        primary: ChromaticColor::Blue,
        secondary: ChromaticColor::Violet,
        success: ChromaticColor::Green,
        info: ChromaticColor::Sky,
        warning: ChromaticColor::Amber,
        error: ChromaticColor::Red,
        neutral: NeutralColor::Slate,
    };

    /// The colours as stored, in column order: primary, secondary, success, info, warning,
    /// error, neutral.
    pub fn as_columns(&self) -> [&'static str; 7] {
        [
            self.primary.as_str(),
            self.secondary.as_str(),
            self.success.as_str(),
            self.info.as_str(),
            self.warning.as_str(),
            self.error.as_str(),
            self.neutral.as_str(),
        ]
    }

    /// Parses stored columns (same order as [`ThemeColors::as_columns`]).
    pub fn from_columns(columns: [&str; 7]) -> Result<Self, String> {
        Ok(Self {
            primary: columns[0].parse()?,
            secondary: columns[1].parse()?,
            success: columns[2].parse()?,
            info: columns[3].parse()?,
            warning: columns[4].parse()?,
            error: columns[5].parse()?,
            neutral: columns[6].parse()?,
        })
    }
}

/// Where a user's effective theme came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ThemeSource {
    /// The user's own colour snapshot.
    User,
    /// The site's default preset.
    DefaultPreset,
    /// Nubo's built-in theme.
    BuiltIn,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_are_17_chromatic_and_5_neutral_colours() {
        assert_eq!(ChromaticColor::ALL.len(), 17);
        assert_eq!(NeutralColor::ALL.len(), 5);
    }

    #[test]
    fn every_colour_round_trips_through_text_and_json() {
        for c in ChromaticColor::ALL {
            assert_eq!(c.as_str().parse::<ChromaticColor>().unwrap(), *c);
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
        for c in NeutralColor::ALL {
            assert_eq!(c.as_str().parse::<NeutralColor>().unwrap(), *c);
        }
    }

    #[test]
    fn chromatic_and_neutral_sets_do_not_mix() {
        assert!("slate".parse::<ChromaticColor>().is_err());
        assert!("red".parse::<NeutralColor>().is_err());
        assert!("Red".parse::<ChromaticColor>().is_err());
        assert!("magenta".parse::<ChromaticColor>().is_err());
    }

    #[test]
    fn columns_round_trip() {
        let colors = ThemeColors::BUILT_IN;
        assert_eq!(ThemeColors::from_columns(colors.as_columns()).unwrap(), colors);
    }
}
