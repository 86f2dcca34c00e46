//! The views (`archived/`, `favourites/`, `projects/`, `engines/`) and
//! `sessions.json`: sessions shown another way, and `mv` in and out of
//! `archived/`.

use crate::core::tree::node::{Kind, Node, SessionFile, ViewDir};
use crate::core::tree::requests::Files;
use crate::error::{Error, Result};
use crate::key::SessionKey;

impl Files {
    /// Active sessions with what the views group them by, in listing order.
    fn active(&self) -> Vec<(SessionKey, bool, Option<String>)> {
        self.core.active_groups()
    }

    /// Whether an active session has this project (or engine): a facet
    /// directory exists while one does.
    fn facet_exists(&self, view: ViewDir, name: &str) -> bool {
        self.core.membership().has_facet(view, name)
    }

    pub(in crate::core) fn views_entries(&self, node: &Node) -> Result<Vec<(Node, Kind, String)>> {
        let link = |view, facet: Option<&String>, key: SessionKey| {
            let name = key.as_str().to_owned();
            (
                Node::ViewLink(view, facet.cloned(), key),
                Kind::Symlink,
                name,
            )
        };
        Ok(match node {
            Node::View(ViewDir::Archived) => self
                .core
                .keys_in(true)
                .into_iter()
                .map(|k| {
                    let name = k.as_str().to_owned();
                    (Node::Session(k, SessionFile::Dir), Kind::Dir, name)
                })
                .collect(),
            Node::View(ViewDir::Favourites) => self
                .active()
                .into_iter()
                .filter(|(_, fav, _)| *fav)
                .map(|(k, _, _)| link(ViewDir::Favourites, None, k))
                .collect(),
            // From the members' index: no look at every session.
            Node::View(view @ (ViewDir::Projects | ViewDir::Engines)) => self
                .core
                .membership()
                .facet_names(*view)
                .into_iter()
                .map(|n| (Node::Facet(*view, n.clone()), Kind::Dir, n))
                .collect(),
            Node::Facet(view, name) => self
                .active()
                .into_iter()
                .filter(|(k, _, p)| match view {
                    ViewDir::Projects => p.as_ref() == Some(name),
                    _ => k.engine() == name,
                })
                .map(|(k, _, _)| link(*view, Some(name), k))
                .collect(),
            _ => return Err(Error::new(libc::ENOTDIR, "not a directory")),
        })
    }

    pub(in crate::core) fn views_lookup(&self, parent: &Node, name: &str) -> Result<Node> {
        let missing = || Error::not_found(format!("no {name} here"));
        // A session in a view is looked at alone: `ls -l` of a view of
        // thousands looks each one up, and must not list them all each time.
        if let Node::View(ViewDir::Archived | ViewDir::Favourites) | Node::Facet(..) = parent {
            let key = SessionKey::parse(name).map_err(|_| missing())?;
            if !self.core.exists(&key) {
                return Err(missing());
            }
            let (archived, favourite, project) = self.core.flags(&key);
            return match parent {
                Node::View(ViewDir::Archived) if archived => {
                    Ok(Node::Session(key, SessionFile::Dir))
                }
                Node::View(ViewDir::Favourites) if favourite && !archived => {
                    Ok(Node::ViewLink(ViewDir::Favourites, None, key))
                }
                Node::Facet(view @ ViewDir::Projects, facet)
                    if !archived && project.as_ref() == Some(facet) =>
                {
                    Ok(Node::ViewLink(*view, Some(facet.clone()), key))
                }
                Node::Facet(view @ ViewDir::Engines, facet)
                    if !archived && key.engine() == facet =>
                {
                    Ok(Node::ViewLink(*view, Some(facet.clone()), key))
                }
                _ => Err(missing()),
            };
        }
        if let Node::View(view @ (ViewDir::Projects | ViewDir::Engines)) = parent {
            return if self.facet_exists(*view, name) {
                Ok(Node::Facet(*view, name.to_string()))
            } else {
                Err(missing())
            };
        }
        self.views_entries(parent)?
            .into_iter()
            .find(|(_, _, n)| n == name)
            .map(|(node, _, _)| node)
            .ok_or_else(|| Error::not_found(format!("no {name} here")))
    }

    /// `mv KEY archived/` archives; `mv archived/KEY .` unarchives.
    pub(in crate::core) fn rename_session(
        &self,
        from_parent: &Node,
        name: &str,
        to_parent: &Node,
        new_name: &str,
    ) -> Result<()> {
        // The kernel found `name`: a file or directory of the mount's own.
        let key = SessionKey::parse(name)
            .map_err(|_| Error::perm("only sessions move here, into and out of archived/"))?;
        if new_name != name {
            return Err(Error::perm("sessions keep their key; set a title instead"));
        }
        match (from_parent, to_parent) {
            (Node::Root, Node::View(ViewDir::Archived)) if !self.core.is_archived(&key) => {
                self.core.archive(&key)
            }
            (Node::View(ViewDir::Archived), Node::Root) if self.core.is_archived(&key) => {
                self.core.unarchive(&key)
            }
            // The kernel still had the old entry: the session moved
            // meanwhile (through a file, another daemon). It is no longer
            // where it was named; EXDEV would have `mv` copy it.
            (Node::Root, Node::View(ViewDir::Archived)) => {
                Err(Error::not_found(format!("{key} is archived already")))
            }
            (Node::View(ViewDir::Archived), Node::Root) => {
                Err(Error::not_found(format!("{key} is not archived")))
            }
            _ => Err(Error::new(
                libc::EXDEV,
                "sessions move only into and out of archived/",
            )),
        }
    }
}

/// Where a view's symlink points, relative to the link.
pub(in crate::core) fn link_target(node: &Node) -> String {
    match node {
        Node::ViewLink(_, None, key) => format!("../{key}"),
        Node::ViewLink(_, Some(_), key) => format!("../../{key}"),
        Node::Scratch(..) => String::new(),
        _ => String::new(),
    }
}
