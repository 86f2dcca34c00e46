//! The views: the directories that show sessions another way (archived,
//! favourites, by project, by engine). Which sessions each holds is the
//! members index's (`members`); their files are the tree's (`tree::view_files`).

/// The directories that show sessions another way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ViewDir {
    Archived,
    Favourites,
    Projects,
    Engines,
}

impl ViewDir {
    pub const ALL: [ViewDir; 4] = [
        ViewDir::Archived,
        ViewDir::Favourites,
        ViewDir::Projects,
        ViewDir::Engines,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ViewDir::Archived => "archived",
            ViewDir::Favourites => "favourites",
            ViewDir::Projects => "projects",
            ViewDir::Engines => "engines",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == name)
    }
}
