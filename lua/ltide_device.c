/*
 * ltide_device.c — devices from Lua: tide.sync(), tide.devices() (every device the build's
 * kinds have, from the registry), tide.vulkan.available(), tide.vulkan.devices(),
 * tide.set_default_device/get_default_device (where creation ops make tensors). Moving tensors
 * is x:to("vulkan") / x:to("cpu") (ltide_tensor.c); creation takes a {device=} option.
 */
#include "ltide.h"

/* tide.sync(): waits for every queued kernel. */
static int l_sync(lua_State *L)
{
    if (tide_sync() < 0)
        return lt_raise(L, NULL);
    return 0;
}

/* tide.devices() -> { {name="cpu", about=""}, {name="vulkan", about="llvmpipe (CPU)"}, ... }:
 * name is what x:to() and {device=} take. Nothing is opened. */
static int l_all_devices(lua_State *L)
{
    int n = tide_device_count();
    lua_createtable(L, n > 0 ? n : 0, 0);
    for (int i = 0, k = 0; i < n; i++) {
        char name[64], about[320];
        if (tide_device_info(i, name, sizeof name, about, sizeof about) < 0)
            continue;
        lua_createtable(L, 0, 2);
        lua_pushstring(L, name);
        lua_setfield(L, -2, "name");
        lua_pushstring(L, about);
        lua_setfield(L, -2, "about");
        lua_rawseti(L, -2, ++k);
    }
    return 1;
}

/* tide.vulkan.available() -> true, or false and the reason */
static int l_available(lua_State *L)
{
    char why[512];
    if (tide_vulkan_available(why, sizeof why)) {
        lua_pushboolean(L, 1);
        return 1;
    }
    lua_pushboolean(L, 0);
    lua_pushstring(L, why);
    return 2;
}

/* tide.vulkan.devices() -> { {index=0, name=, kind=, selected=}, ... } (index is what
 * TIDE_VULKAN_DEVICE takes); empty when there is no Vulkan. */
static int l_devices(lua_State *L)
{
    int n = tide_vulkan_device_count();
    lua_createtable(L, n > 0 ? n : 0, 0);
    for (int i = 0; i < n; i++) {
        char name[256];
        const char *kind = "";
        bool selected = false;
        if (tide_vulkan_device_info(i, name, sizeof name, &kind, &selected) < 0)
            continue;
        lua_createtable(L, 0, 4);
        lua_pushinteger(L, i);
        lua_setfield(L, -2, "index");
        lua_pushstring(L, name);
        lua_setfield(L, -2, "name");
        lua_pushstring(L, kind);
        lua_setfield(L, -2, "kind");
        lua_pushboolean(L, selected);
        lua_setfield(L, -2, "selected");
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* tide.set_default_device(name): where creation ops make tensors in this thread. */
static int l_set_default_device(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    if (tide_set_default_device(name) < 0)
        return lt_raise(L, NULL);
    return 0;
}

/* tide.get_default_device() -> "cpu", "vulkan", ... */
static int l_get_default_device(lua_State *L)
{
    lua_pushstring(L, tide_get_default_device());
    return 1;
}

void lt_open_device(lua_State *L, int mt, int methods, int module)
{
    (void)mt;
    (void)methods;
    lua_pushcfunction(L, l_sync);
    lua_setfield(L, module, "sync");
    lua_pushcfunction(L, l_set_default_device);
    lua_setfield(L, module, "set_default_device");
    lua_pushcfunction(L, l_get_default_device);
    lua_setfield(L, module, "get_default_device");
    lua_pushcfunction(L, l_all_devices);
    lua_setfield(L, module, "devices");
    lua_createtable(L, 0, 2);
    lua_pushcfunction(L, l_available);
    lua_setfield(L, -2, "available");
    lua_pushcfunction(L, l_devices);
    lua_setfield(L, -2, "devices");
    lua_setfield(L, module, "vulkan");
}
