//! A minimal, allocation-light class-file reader for analysis: constant pool,
//! class header, methods with their `Code` bytes, and `BootstrapMethods`.
//!
//! It reads only what analysis needs and never trusts a length or an index:
//! every read is bounds-checked and every failure is an [`Error::Malformed`]
//! naming where the class file went wrong.

use std::borrow::Cow;

use crate::Error;

/// A big-endian cursor over a byte slice.
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Error> {
        if n > self.remaining() {
            return Err(Error::Malformed(format!(
                "truncated at byte {} reading {what} ({n} bytes needed, {} left)",
                self.pos,
                self.remaining()
            )));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn u1(&mut self, what: &str) -> Result<u8, Error> {
        Ok(self.take(1, what)?[0])
    }

    pub(crate) fn u2(&mut self, what: &str) -> Result<u16, Error> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn u4(&mut self, what: &str) -> Result<u32, Error> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// One constant-pool entry, as far as analysis cares.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Entry<'a> {
    /// Index 0 and the second slot of a long/double.
    Unusable,
    Utf8(&'a [u8]),
    Class(u16),
    /// Fieldref, Methodref, InterfaceMethodref: tag, class, name-and-type.
    MemberRef(u8, u16, u16),
    NameAndType(u16, u16),
    MethodHandle(u8, u16),
    /// Dynamic or InvokeDynamic: tag, bootstrap index.
    Dynamic(u8, u16),
    /// Integer, Float, Long, Double, String, MethodType, Module, Package.
    Other(u8),
}

pub(crate) const TAG_FIELDREF: u8 = 9;
pub(crate) const TAG_METHODREF: u8 = 10;
pub(crate) const TAG_INTERFACE_METHODREF: u8 = 11;
pub(crate) const TAG_INVOKE_DYNAMIC: u8 = 18;

/// The constant pool, indexed from 1.
pub(crate) struct ConstantPool<'a> {
    entries: Vec<Entry<'a>>,
}

impl<'a> ConstantPool<'a> {
    fn parse(c: &mut Cursor<'a>) -> Result<Self, Error> {
        let count = c.u2("constant_pool_count")? as usize;
        if count == 0 {
            return Err(Error::Malformed("constant_pool_count is 0".into()));
        }
        let mut entries = Vec::with_capacity(count);
        entries.push(Entry::Unusable);
        while entries.len() < count {
            let index = entries.len();
            let tag = c.u1("constant tag")?;
            let entry = match tag {
                1 => {
                    let len = c.u2("Utf8 length")? as usize;
                    Entry::Utf8(c.take(len, "Utf8 bytes")?)
                }
                3 | 4 => {
                    c.take(4, "4-byte constant")?;
                    Entry::Other(tag)
                }
                5 | 6 => {
                    c.take(8, "8-byte constant")?;
                    if index + 1 >= count {
                        return Err(Error::Malformed(format!(
                            "8-byte constant at #{index} overruns the constant pool"
                        )));
                    }
                    entries.push(Entry::Other(tag));
                    Entry::Unusable
                }
                7 => Entry::Class(c.u2("Class name index")?),
                8 | 16 | 19 | 20 => {
                    c.u2("constant index")?;
                    Entry::Other(tag)
                }
                9..=11 => {
                    Entry::MemberRef(tag, c.u2("member class")?, c.u2("member name-and-type")?)
                }
                12 => Entry::NameAndType(c.u2("name index")?, c.u2("descriptor index")?),
                15 => Entry::MethodHandle(c.u1("reference kind")?, c.u2("reference index")?),
                17 | 18 => {
                    let bootstrap = c.u2("bootstrap index")?;
                    c.u2("name-and-type")?;
                    Entry::Dynamic(tag, bootstrap)
                }
                _ => {
                    return Err(Error::Malformed(format!(
                        "unknown constant tag {tag} at #{index} (byte {})",
                        c.pos() - 1
                    )));
                }
            };
            entries.push(entry);
        }
        Ok(Self { entries })
    }

    pub(crate) fn get(&self, index: u16) -> Result<Entry<'a>, Error> {
        match self.entries.get(index as usize) {
            Some(Entry::Unusable) | None => Err(Error::Malformed(format!(
                "invalid constant-pool index #{index} (pool has {} slots)",
                self.entries.len()
            ))),
            Some(e) => Ok(*e),
        }
    }

    pub(crate) fn utf8(&self, index: u16) -> Result<Cow<'a, str>, Error> {
        match self.get(index)? {
            Entry::Utf8(bytes) => ristretto_classfile::mutf8::from_bytes_cow(bytes).map_err(|e| {
                Error::Malformed(format!("constant #{index}: bad modified UTF-8: {e}"))
            }),
            other => Err(wrong_kind(index, "Utf8", other)),
        }
    }

    pub(crate) fn class_name(&self, index: u16) -> Result<Cow<'a, str>, Error> {
        match self.get(index)? {
            Entry::Class(name) => self.utf8(name),
            other => Err(wrong_kind(index, "Class", other)),
        }
    }

    pub(crate) fn name_and_type(&self, index: u16) -> Result<(Cow<'a, str>, Cow<'a, str>), Error> {
        match self.get(index)? {
            Entry::NameAndType(n, d) => Ok((self.utf8(n)?, self.utf8(d)?)),
            other => Err(wrong_kind(index, "NameAndType", other)),
        }
    }

    /// A Fieldref/Methodref/InterfaceMethodref: (tag, owner, name, descriptor).
    pub(crate) fn member(&self, index: u16) -> Result<(u8, Member), Error> {
        match self.get(index)? {
            Entry::MemberRef(tag, class, nat) => {
                let (name, descriptor) = self.name_and_type(nat)?;
                Ok((
                    tag,
                    Member {
                        owner: self.class_name(class)?.into_owned(),
                        name: name.into_owned(),
                        descriptor: descriptor.into_owned(),
                    },
                ))
            }
            other => Err(wrong_kind(index, "Methodref", other)),
        }
    }
}

/// The owner, name and descriptor of a member reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    pub(crate) owner: String,
    pub(crate) name: String,
    pub(crate) descriptor: String,
}

fn wrong_kind(index: u16, expected: &str, found: Entry<'_>) -> Error {
    let found = match found {
        Entry::Unusable => "unusable slot".to_string(),
        Entry::Utf8(_) => "Utf8".into(),
        Entry::Class(_) => "Class".into(),
        Entry::MemberRef(tag, ..) => format!("member reference (tag {tag})"),
        Entry::NameAndType(..) => "NameAndType".into(),
        Entry::MethodHandle(..) => "MethodHandle".into(),
        Entry::Dynamic(tag, ..) => format!("dynamic constant (tag {tag})"),
        Entry::Other(tag) => format!("constant with tag {tag}"),
    };
    Error::Malformed(format!(
        "constant #{index} should be {expected} but is {found}"
    ))
}

/// A method as read from the class file.
pub(crate) struct RawMethod<'a> {
    pub(crate) access: u16,
    pub(crate) name: u16,
    pub(crate) descriptor: u16,
    /// The bytecode of the `Code` attribute, if any.
    pub(crate) code: Option<&'a [u8]>,
}

/// A `BootstrapMethods` entry: the bootstrap method handle and its arguments.
pub(crate) struct Bootstrap {
    pub(crate) method: u16,
    pub(crate) args: Vec<u16>,
}

/// The parts of a class file analysis needs.
pub(crate) struct RawClass<'a> {
    pub(crate) major: u16,
    pub(crate) access: u16,
    pub(crate) this_class: u16,
    pub(crate) super_class: u16,
    pub(crate) interfaces: Vec<u16>,
    pub(crate) pool: ConstantPool<'a>,
    pub(crate) methods: Vec<RawMethod<'a>>,
    pub(crate) bootstraps: Vec<Bootstrap>,
}

impl<'a> RawClass<'a> {
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<Self, Error> {
        let mut c = Cursor::new(bytes);
        let magic = c.u4("magic")?;
        if magic != 0xCAFE_BABE {
            return Err(Error::Malformed(format!(
                "bad magic 0x{magic:08X}, expected 0xCAFEBABE"
            )));
        }
        let _minor = c.u2("minor_version")?;
        let major = c.u2("major_version")?;
        if !(45..=255).contains(&major) {
            return Err(Error::Unsupported(format!(
                "class file major version {major}"
            )));
        }
        let pool = ConstantPool::parse(&mut c)?;
        let access = c.u2("access_flags")?;
        let this_class = c.u2("this_class")?;
        let super_class = c.u2("super_class")?;
        let n = c.u2("interfaces_count")?;
        let mut interfaces = Vec::with_capacity(n as usize);
        for _ in 0..n {
            interfaces.push(c.u2("interface index")?);
        }
        let fields = c.u2("fields_count")?;
        for _ in 0..fields {
            c.take(6, "field header")?;
            skip_attributes(&mut c)?;
        }
        let n = c.u2("methods_count")?;
        let mut methods = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let access = c.u2("method access_flags")?;
            let name = c.u2("method name index")?;
            let descriptor = c.u2("method descriptor index")?;
            let mut code = None;
            let attrs = c.u2("method attributes_count")?;
            for _ in 0..attrs {
                let attr_name = c.u2("attribute name index")?;
                let len = c.u4("attribute length")? as usize;
                let body = c.take(len, "attribute body")?;
                if code.is_none() && is_utf8(&pool, attr_name, b"Code") {
                    code = Some(code_bytes(body)?);
                }
            }
            methods.push(RawMethod {
                access,
                name,
                descriptor,
                code,
            });
        }
        let mut bootstraps = Vec::new();
        let attrs = c.u2("class attributes_count")?;
        for _ in 0..attrs {
            let attr_name = c.u2("attribute name index")?;
            let len = c.u4("attribute length")? as usize;
            let body = c.take(len, "attribute body")?;
            if is_utf8(&pool, attr_name, b"BootstrapMethods") {
                bootstraps = parse_bootstraps(body)?;
            }
        }
        if c.remaining() != 0 {
            return Err(Error::Malformed(format!(
                "{} extra bytes after the end of the class file",
                c.remaining()
            )));
        }
        Ok(Self {
            major,
            access,
            this_class,
            super_class,
            interfaces,
            pool,
            methods,
            bootstraps,
        })
    }
}

fn is_utf8(pool: &ConstantPool<'_>, index: u16, expected: &[u8]) -> bool {
    matches!(pool.get(index), Ok(Entry::Utf8(b)) if b == expected)
}

fn skip_attributes(c: &mut Cursor<'_>) -> Result<(), Error> {
    let n = c.u2("attributes_count")?;
    for _ in 0..n {
        c.u2("attribute name index")?;
        let len = c.u4("attribute length")? as usize;
        c.take(len, "attribute body")?;
    }
    Ok(())
}

/// The bytecode array inside a `Code` attribute body.
fn code_bytes(body: &[u8]) -> Result<&[u8], Error> {
    let mut c = Cursor::new(body);
    c.take(4, "Code max_stack/max_locals")?;
    let len = c.u4("code_length")? as usize;
    let code = c.take(len, "Code bytes")?;
    let handlers = c.u2("exception_table_length")? as usize;
    c.take(handlers * 8, "exception table")?;
    skip_attributes(&mut c)?;
    if c.remaining() != 0 {
        return Err(Error::Malformed(
            "Code attribute length does not match its contents".into(),
        ));
    }
    Ok(code)
}

fn parse_bootstraps(body: &[u8]) -> Result<Vec<Bootstrap>, Error> {
    let mut c = Cursor::new(body);
    let n = c.u2("num_bootstrap_methods")?;
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let method = c.u2("bootstrap_method_ref")?;
        let nargs = c.u2("num_bootstrap_arguments")?;
        let mut args = Vec::with_capacity(nargs as usize);
        for _ in 0..nargs {
            args.push(c.u2("bootstrap argument")?);
        }
        out.push(Bootstrap { method, args });
    }
    Ok(out)
}
