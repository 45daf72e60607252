use super::*;

#[test]
fn a_fleet_of_one_flavour_starts_and_a_mixed_one_is_refused() {
    assert!(check_flavours(&[]).is_ok());
    assert!(check_flavours(&[(true, "a"), (true, "b")]).is_ok());
    assert!(check_flavours(&[(false, "a"), (false, "b")]).is_ok());
    let e = check_flavours(&[(true, "east"), (false, "west")]).unwrap_err();
    assert!(
        e.contains("east") && e.contains("west") && e.contains("MariaDB"),
        "{e}"
    );
}
