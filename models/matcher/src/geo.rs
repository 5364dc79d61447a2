//! Where searches are and who may meet: the geography and platform rule of candidate selection,
//! below both the queue and the nearest-candidate index.

/// Earth's mean radius, km.
pub const EARTH_RADIUS_KM: f64 = 6371.0;

/// `(x, y, z)` on a sphere of the Earth's radius, km.
#[must_use]
pub fn unit_xyz(lat: f64, lon: f64) -> [f64; 3] {
    let (la, lo) = (lat.to_radians(), lon.to_radians());
    [
        EARTH_RADIUS_KM * la.cos() * lo.cos(),
        EARTH_RADIUS_KM * la.cos() * lo.sin(),
        EARTH_RADIUS_KM * la.sin(),
    ]
}

/// Great-circle distance (km) between two points given by [`unit_xyz`].
#[must_use]
pub fn great_circle_km(a: &[f64; 3], b: &[f64; 3]) -> f64 {
    let chord = ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt();
    2.0 * EARTH_RADIUS_KM * (chord / (2.0 * EARTH_RADIUS_KM)).min(1.0).asin()
}

/// Whether two searches may share a lobby, on their platform and cross-play fields: the same
/// platform, or both accept cross-play.
pub(crate) fn compatible(pa: u8, ca: bool, pb: u8, cb: bool) -> bool {
    pa == pb || (ca && cb)
}
