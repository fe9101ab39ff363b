//! Medians with min/max over repeated measurements.

use serde_json::{Value, json};

/// Median, minimum and maximum of a set of samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Summary {
    /// None when there are no finite samples.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Summary {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        })
    }

    pub fn json(&self) -> Value {
        json!({"median": self.median, "min": self.min, "max": self.max, "n": self.n})
    }

    /// A summary written by [`Summary::json`] read back (`None` for
    /// `null` or anything else).
    pub fn from_json(v: &Value) -> Option<Summary> {
        Some(Summary {
            median: v.get("median")?.as_f64()?,
            min: v.get("min")?.as_f64()?,
            max: v.get("max")?.as_f64()?,
            n: v.get("n")?.as_u64()? as usize,
        })
    }
}

/// `Summary::of(..)` as JSON, `null` when empty.
pub fn json_of(samples: &[f64]) -> Value {
    Summary::of(samples).map_or(Value::Null, |s| s.json())
}

/// Median of the samples (NaN when empty).
pub fn median(samples: &[f64]) -> f64 {
    Summary::of(samples).map_or(f64::NAN, |s| s.median)
}

/// "median [min–max]" with the given precision, "-" when empty.
pub fn fmt(s: Option<Summary>, prec: usize) -> String {
    match s {
        None => "-".to_owned(),
        Some(s) if s.n == 1 => format!("{:.*}", prec, s.median),
        Some(s) => format!(
            "{:.*} [{:.*}-{:.*}]",
            prec, s.median, prec, s.min, prec, s.max
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_even_and_empty() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(Summary::of(&[4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[f64::NAN]).is_none());
        assert!(median(&[]).is_nan());
        assert_eq!(fmt(None, 1), "-");
        assert_eq!(fmt(Summary::of(&[1.0, 3.0]), 1), "2.0 [1.0-3.0]");
    }
}
