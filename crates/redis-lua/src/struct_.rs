use mlua::{Lua, Table};

use crate::shim::Shim;

pub fn module(lua: &Lua, _shim: &Shim) -> mlua::Result<Table> {
    lua.create_table()
}
